// TILE x TILE threadgroup per output tile, but each thread computes CO output channels (a
// register block over channels), so every staged input patch serves CO outputs instead of one
// and the grid's z is n * ceil(Cout / CO). Per input channel the patch (with halo) and the CO x 9
// taps are staged in threadgroup memory; channels past Cout get zero taps and no store.
constexpr int P = TILE + 2;
threadgroup float patch[P][P];
threadgroup float taps[CO][9];
const int tx = int(thread_position_in_threadgroup.x), ty = int(thread_position_in_threadgroup.y);
const int tid = ty * TILE + tx;
const int gx0 = int(threadgroup_position_in_grid.x) * TILE;
const int gy0 = int(threadgroup_position_in_grid.y) * TILE;
const int ox = gx0 + tx, oy = gy0 + ty;
const int cin = Cin, cout = Cout, h = H, wd = W;
const int groups = (cout + CO - 1) / CO;
const int n = int(threadgroup_position_in_grid.z) / groups;
const int co0 = (int(threadgroup_position_in_grid.z) % groups) * CO;

float acc[CO];
for (int c = 0; c < CO; ++c) acc[c] = co0 + c < cout ? bias[co0 + c] : 0.0f;
for (int ci = 0; ci < cin; ++ci) {
  const device float* xc = x + (size_t(n) * cin + ci) * h * wd;
  for (int i = tid; i < P * P; i += TILE * TILE) {
    const int gy = gy0 + i / P - 1, gx = gx0 + i % P - 1;
    patch[i / P][i % P] = (gy >= 0 && gy < h && gx >= 0 && gx < wd) ? xc[gy * wd + gx] : 0.0f;
  }
  if (tid < CO * 9) {
    const int c = tid / 9, k = tid % 9;
    taps[c][k] = co0 + c < cout ? w[(size_t(co0 + c) * cin + ci) * 9 + k] : 0.0f;
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  float v[9];
  for (int ky = 0; ky < 3; ++ky)
    for (int kx = 0; kx < 3; ++kx) v[ky * 3 + kx] = patch[ty + ky][tx + kx];
  for (int c = 0; c < CO; ++c)
    for (int k = 0; k < 9; ++k) acc[c] = fma(taps[c][k], v[k], acc[c]);
  threadgroup_barrier(mem_flags::mem_threadgroup);
}
if (oy < h && ox < wd) {
  for (int c = 0; c < CO && co0 + c < cout; ++c)
    out[((size_t(n) * cout + co0 + c) * h + oy) * wd + ox] = acc[c];
}

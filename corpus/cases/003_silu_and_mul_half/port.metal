// One threadgroup per token, as in CUDA; half2 pairs when d is even, scalars otherwise.
// Math in float, one rounding to half per output. The CUDA output comes first in its
// parameter list; here it is simply the MLX output.
const uint token = threadgroup_position_in_grid.x;
const uint tid = thread_position_in_threadgroup.x;
const uint tg = threads_per_threadgroup.x;
const uint dim = uint(d);
const device half* gate = x + size_t(token) * 2 * dim;
const device half* up = gate + dim;
device half* dst = out + size_t(token) * dim;
if ((dim & 1) == 0) {
  for (uint i = tid; i < dim / 2; i += tg) {
    float2 g = float2(((const device half2*)gate)[i]);
    float2 u = float2(((const device half2*)up)[i]);
    float2 s = g / (1.0f + exp(-g));
    ((device half2*)dst)[i] = half2(s * u);
  }
} else {
  for (uint i = tid; i < dim; i += tg) {
    float g = float(gate[i]);
    dst[i] = half(g / (1.0f + exp(-g)) * float(up[i]));
  }
}

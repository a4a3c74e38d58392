// Same three passes. Each block reduction is simd_max/simd_sum, one threadgroup slot per SIMD
// group, a barrier, and every SIMD group re-reducing the slots (so no broadcast store), then a
// barrier before the slots are reused. exp is Metal's default fast exp, as MLX's softmax uses.
constexpr uint kSimds = BLOCK / 32;
threadgroup float scratch[kSimds];
const uint lane = thread_index_in_simdgroup;
const uint sg = simdgroup_index_in_threadgroup;
const uint tid = thread_position_in_threadgroup.x;
const uint cols = uint(n);
const device float* src = x + size_t(threadgroup_position_in_grid.x) * cols;
device float* dst = y + size_t(threadgroup_position_in_grid.x) * cols;

float m = -INFINITY;
for (uint c = tid; c < cols; c += BLOCK) m = fmax(m, src[c]);
m = simd_max(m);
if (lane == 0) scratch[sg] = m;
threadgroup_barrier(mem_flags::mem_threadgroup);
m = simd_max(lane < kSimds ? scratch[lane] : -INFINITY);
threadgroup_barrier(mem_flags::mem_threadgroup);

float s = 0.0f;
for (uint c = tid; c < cols; c += BLOCK) s += exp(src[c] - m);
s = simd_sum(s);
if (lane == 0) scratch[sg] = s;
threadgroup_barrier(mem_flags::mem_threadgroup);
s = simd_sum(lane < kSimds ? scratch[lane] : 0.0f);

const float inv = 1.0f / s;
for (uint c = tid; c < cols; c += BLOCK) dst[c] = exp(src[c] - m) * inv;

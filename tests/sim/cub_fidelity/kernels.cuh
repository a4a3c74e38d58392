// Kernels that exercise CUB's collectives, compiled both by nvcc against real CUB (on the NVIDIA
// machine, cases.py writes the host program) and by cuda_sim against kport's CUB, to compare the
// outputs bit for bit. Every kernel takes (const T* in, T* out, int p0, int p1) and writes only
// the values CUB defines; out starts zeroed on both sides.
#include <cub/cub.cuh>

struct AddOp {
  template <class T>
  __device__ T operator()(const T& a, const T& b) const { return a + b; }
};
struct MaxOp {
  template <class T>
  __device__ T operator()(const T& a, const T& b) const { return a < b ? b : a; }
};
// Mamba's selective-scan operator on (a, b) pairs, with an explicit FMA so that compilers agree.
struct SsmOp {
  __device__ float2 operator()(const float2& l, const float2& r) const {
    return make_float2(r.x * l.x, fmaf(r.x, l.y, r.y));
  }
};
// A running prefix across tiles: returns the prefix so far, then folds in the tile's total.
template <class T, class Op>
struct RunningPrefix {
  T running;
  __device__ RunningPrefix(T start) : running(start) {}
  __device__ T operator()(T block_aggregate) {
    T old = running;
    running = Op()(running, block_aggregate);
    return old;
  }
};

// out: the loaded items in register order per thread, then the tile the store wrote.
template <class T, int BX, int IPT, cub::BlockLoadAlgorithm LA, cub::BlockStoreAlgorithm SA,
          int BY>
__global__ void load_store_k(const T* in, T* out, int valid, int with_default) {
  using BL = cub::BlockLoad<T, BX, IPT, LA, BY>;
  using BS = cub::BlockStore<T, BX, IPT, SA, BY>;
  __shared__ typename BL::TempStorage lts;
  __shared__ typename BS::TempStorage sts;
  constexpr int TILE = BX * BY * IPT;
  int tid = threadIdx.x + threadIdx.y * BX;
  const T* src = in + blockIdx.x * TILE;
  T* dump = out + blockIdx.x * TILE;
  T* dst = out + gridDim.x * TILE + blockIdx.x * TILE;
  T items[IPT];
  for (int i = 0; i < IPT; i++) items[i] = T(-7);
  if (valid < 0) BL(lts).Load(src, items);
  else if (with_default) BL(lts).Load(src, items, valid, T(-3));
  else BL(lts).Load(src, items, valid);
  for (int i = 0; i < IPT; i++) dump[tid * IPT + i] = items[i];
  if (valid < 0) BS(sts).Store(dst, items);
  else BS(sts).Store(dst, items, valid);
}

// out[5 * block + k]: Sum, Sum(num_valid), Reduce(max), Sum(IPT items), Reduce(add, num_valid).
template <class T, int BT, cub::BlockReduceAlgorithm ALG, int IPT>
__global__ void reduce_k(const T* in, T* out, int num_valid, int) {
  using BR = cub::BlockReduce<T, BT, ALG>;
  __shared__ typename BR::TempStorage ts;
  int tid = threadIdx.x;
  T x = in[blockIdx.x * BT + tid];
  T items[IPT];
  for (int i = 0; i < IPT; i++) items[i] = in[gridDim.x * BT + (blockIdx.x * BT + tid) * IPT + i];
  T r[5];
  r[0] = BR(ts).Sum(x);
  __syncthreads();
  r[1] = BR(ts).Sum(x, num_valid);
  __syncthreads();
  r[2] = BR(ts).Reduce(x, MaxOp());
  __syncthreads();
  r[3] = BR(ts).Sum(items);
  __syncthreads();
  r[4] = BR(ts).Reduce(x, AddOp(), num_valid);
  if (tid == 0)
    for (int k = 0; k < 5; k++) out[blockIdx.x * 5 + k] = r[k];
}

// vLLM's pattern: a block smaller than BT reduces blockDim.x values.
template <int BT, cub::BlockReduceAlgorithm ALG>
__global__ void reduce_launch_k(const float* in, float* out, int, int) {
  using BR = cub::BlockReduce<float, BT, ALG>;
  __shared__ typename BR::TempStorage ts;
  float r = BR(ts).Reduce(in[blockIdx.x * blockDim.x + threadIdx.x], AddOp(), blockDim.x);
  if (threadIdx.x == 0) out[blockIdx.x] = r;
}

// Block b reads 3 tiles of BT*IPT items from in + 3*b*TILE and writes 3 tiles of results, then
// per-thread aggregates (or each tile's running prefix) to out + 4*b*TILE.
template <class T, int BT, cub::BlockScanAlgorithm ALG, int IPT>
__global__ void scan_k(const T* in, T* out, int mode, int start) {
  using BS = cub::BlockScan<T, BT, ALG>;
  __shared__ typename BS::TempStorage ts;
  constexpr int TILE = BT * IPT;
  int tid = threadIdx.x;
  const T* src = in + blockIdx.x * 3 * TILE;
  T* dst = out + blockIdx.x * 4 * TILE;
  T* aggs = dst + 3 * TILE;
  T x = src[tid], y, a;
  T items[IPT];
  for (int i = 0; i < IPT; i++) items[i] = src[tid * IPT + i];
  RunningPrefix<T, AddOp> prefix{T(start)};
  RunningPrefix<T, MaxOp> top{T(start)};
  switch (mode) {
    case 0: BS(ts).InclusiveSum(x, y, a); dst[tid] = y; aggs[tid] = a; return;
    case 1: BS(ts).ExclusiveSum(x, y, a); dst[tid] = y; aggs[tid] = a; return;
    case 2: BS(ts).InclusiveScan(x, y, MaxOp()); dst[tid] = y; return;
    case 3: BS(ts).ExclusiveScan(x, y, T(start), AddOp(), a); dst[tid] = y; aggs[tid] = a; return;
    case 4: BS(ts).InclusiveSum(items, items); break;
    case 5: BS(ts).ExclusiveSum(items, items, a); aggs[tid] = a; break;
    case 6: BS(ts).InclusiveScan(items, items, MaxOp(), a); aggs[tid] = a; break;
    case 7: BS(ts).ExclusiveScan(items, items, T(start), AddOp()); break;
    default: break;
  }
  if (mode < 8) {
    for (int i = 0; i < IPT; i++) dst[tid * IPT + i] = items[i];
    return;
  }
  for (int c = 0; c < 3; c++) {  // tiles chained through the prefix callback
    if (c > 0) __syncthreads();
    for (int i = 0; i < IPT; i++) items[i] = src[c * TILE + tid * IPT + i];
    x = src[c * TILE + tid];
    if (mode == 8) BS(ts).InclusiveScan(items, items, AddOp(), prefix);
    if (mode == 9) BS(ts).ExclusiveScan(items, items, AddOp(), prefix);
    if (mode == 10) BS(ts).InclusiveSum(x, items[0], prefix);
    if (mode == 11) BS(ts).ExclusiveSum(x, items[0], prefix);
    if (mode == 12) BS(ts).ExclusiveScan(x, items[0], MaxOp(), top);
    int n = mode >= 10 ? 1 : IPT;
    for (int i = 0; i < n; i++) dst[c * TILE + tid * n + i] = items[i];
    if (tid == 0) aggs[c] = mode == 12 ? top.running : prefix.running;
  }
}

// Mamba's selective scan: chunks of (exp(dA), dBu) pairs chained through a running prefix that
// lane 0 of every warp reads back from shared memory, as selective_scan_fwd_kernel does.
template <int BT, cub::BlockScanAlgorithm ALG, int IPT>
__global__ void ssm_k(const float2* in, float2* out, int chunks, int) {
  using BS = cub::BlockScan<float2, BT, ALG>;
  __shared__ typename BS::TempStorage ts;
  __shared__ float2 running;
  constexpr int TILE = BT * IPT;
  int tid = threadIdx.x;
  const float2* src = in + blockIdx.x * chunks * TILE;
  float2* dst = out + blockIdx.x * (chunks * TILE + chunks);
  for (int c = 0; c < chunks; c++) {
    float2 items[IPT];
    for (int i = 0; i < IPT; i++) items[i] = src[c * TILE + tid * IPT + i];
    float2 start = c > 0 && tid % 32 == 0 ? running : make_float2(1.f, 0.f);
    RunningPrefix<float2, SsmOp> prefix{start};
    BS(ts).InclusiveScan(items, items, SsmOp(), prefix);
    if (tid == 0) running = dst[chunks * TILE + c] = prefix.running;
    for (int i = 0; i < IPT; i++) dst[c * TILE + tid * IPT + i] = items[i];
    __syncthreads();
  }
}

// Logical warps of L lanes: reductions write out[warp], scans out[tid] (and aggregates after).
template <class T, int L>
__global__ void warp_k(const T* in, T* out, int mode, int valid) {
  using WR = cub::WarpReduce<T, L>;
  using WS = cub::WarpScan<T, L>;
  __shared__ typename WR::TempStorage rs[64];
  __shared__ typename WS::TempStorage ss[64];
  int n = blockDim.x, tid = threadIdx.x, w = tid / L;
  bool first = tid % L == 0;
  T x = in[blockIdx.x * n + tid], y, a;
  T* o = out + blockIdx.x * 2 * n;
  switch (mode) {
    case 0: y = WR(rs[w]).Sum(x); if (first) o[w] = y; break;
    case 1: y = WR(rs[w]).Sum(x, valid); if (first) o[w] = y; break;
    case 2: y = WR(rs[w]).Reduce(x, MaxOp()); if (first) o[w] = y; break;
    case 3: y = WR(rs[w]).Reduce(x, AddOp(), valid); if (first) o[w] = y; break;
    case 4: WS(ss[w]).InclusiveSum(x, y, a); o[tid] = y; o[n + tid] = a; break;
    case 5: WS(ss[w]).ExclusiveSum(x, y, a); o[tid] = y; o[n + tid] = a; break;
    case 6: WS(ss[w]).InclusiveScan(x, y, MaxOp()); o[tid] = y; break;
    case 7: WS(ss[w]).ExclusiveScan(x, y, T(valid), AddOp(), a); o[tid] = y; o[n + tid] = a;
      break;
    case 8: WS(ss[w]).ExclusiveScan(x, y, AddOp()); if (!first) o[tid] = y; break;
    case 9: o[tid] = WS(ss[w]).Broadcast(x, 2 % L); break;
    default: break;
  }
}

// kport_cub: CUB's block and warp collectives in MSL (kport's own, written from CUB's documented
// semantics). The translator maps `cub::X` onto `kport_cub::X` (agent/translate/cub.py) and
// passes each collective the thread's linear index in the threadgroup (Metal has no implicit
// threadIdx); TempStorage lives in threadgroup memory. Combining orders follow cuda_sim's CUB
// (docs/fidelity.md "CUB collectives"): shuffle-down trees, Kogge-Stone shuffle-up scans, warp
// totals folded in warp order. Conservative MSL 3.1: templates, enums, explicit address spaces;
// no lambdas, no std. The SIMD lane and group are tid % WARP_THREADS and tid / WARP_THREADS:
// Metal forms SIMD-groups from consecutive thread_index_in_threadgroup values.
namespace kport_cub {

enum { WARP_THREADS = 32 };  // Apple GPUs' SIMD width (threads_per_simdgroup)

enum BlockLoadAlgorithm {
  BLOCK_LOAD_DIRECT, BLOCK_LOAD_STRIPED, BLOCK_LOAD_VECTORIZE, BLOCK_LOAD_TRANSPOSE,
  BLOCK_LOAD_WARP_TRANSPOSE, BLOCK_LOAD_WARP_TRANSPOSE_TIMESLICED
};
enum BlockStoreAlgorithm {
  BLOCK_STORE_DIRECT, BLOCK_STORE_STRIPED, BLOCK_STORE_VECTORIZE, BLOCK_STORE_TRANSPOSE,
  BLOCK_STORE_WARP_TRANSPOSE, BLOCK_STORE_WARP_TRANSPOSE_TIMESLICED
};
enum BlockReduceAlgorithm {
  BLOCK_REDUCE_RAKING_COMMUTATIVE_ONLY, BLOCK_REDUCE_RAKING, BLOCK_REDUCE_WARP_REDUCTIONS
};
enum BlockScanAlgorithm { BLOCK_SCAN_RAKING, BLOCK_SCAN_RAKING_MEMOIZE, BLOCK_SCAN_WARP_SCANS };

// ---- Functors (CUB_MAX / CUB_MIN spellings: the second operand wins only when strictly so)
struct Sum {
  template <typename A, typename B>
  auto operator()(A a, B b) const { return a + b; }
};
struct Max {
  template <typename A, typename B>
  auto operator()(A a, B b) const { return (b > a) ? b : a; }
};
struct Min {
  template <typename A, typename B>
  auto operator()(A a, B b) const { return (b < a) ? b : a; }
};
// T[N], a thread's items: spelled through this alias in parameters, `thread Items<T, N>& v`
template <typename T, int N>
using Items = T[N];
template <typename O> struct is_sum { enum { value = 0 }; };
template <> struct is_sum<Sum> { enum { value = 1 }; };

// ---- Thread-level helpers: a thread's items reduced (a pairwise tree for Sum, left to right
// otherwise, as CUB 3.0) and scanned sequentially.
template <typename T, int N, typename Op>
inline T thread_reduce(thread const Items<T, N>& in, Op op) {
  T v[N];
  for (int i = 0; i < N; ++i) v[i] = in[i];
  if (is_sum<Op>::value) {
    for (int off = 1; off < N; off <<= 1)
      for (int i = 0; i + off < N; i += 2 * off) v[i] = op(v[i], v[i + off]);
    return v[0];
  }
  T acc = v[0];
  for (int i = 1; i < N; ++i) acc = op(acc, v[i]);
  return acc;
}
template <typename T, int N, typename Op>
inline void thread_scan(thread const Items<T, N>& in, thread Items<T, N>& out, Op op, T prefix, bool apply,
                        bool inclusive) {
  T acc = apply ? op(prefix, in[0]) : in[0];
  out[0] = inclusive ? acc : prefix;
  for (int i = 1; i < N; ++i) {
    T next = in[i];
    if (inclusive) {
      acc = op(acc, next);
      out[i] = acc;
    } else {
      out[i] = acc;
      acc = op(acc, next);
    }
  }
}

// ---- SIMD-group building blocks. Every lane of the SIMD-group calls them (uniform control
// flow); `ll` is the lane within a logical warp whose lanes [0, valid) hold values.
// The shuffle-down tree (offsets 1, 2, 4, ...): the logical warp's reduction at ll == 0.
// Each lane reads a lane that holds a value (its own past the end): a SIMD-group of a block that
// is not whole SIMD-groups has no lanes past its last, and reading one is undefined on Apple GPUs.
// `first`: the logical warp's first lane in the SIMD-group.
template <typename T, typename Op>
inline T simd_tree_reduce(T v, int first, int ll, int width, int valid, Op op) {
  for (int off = 1; off < width; off <<= 1) {
    T o = simd_shuffle(v, ushort(first + ll + (ll + off < valid ? off : 0)));
    if (ll + off < valid) v = op(v, o);
  }
  return v;
}
// The Kogge-Stone shuffle-up scan: this lane's inclusive result over lanes [0, ll].
template <typename T, typename Op>
inline T simd_tree_scan(T v, int ll, int width, Op op) {
  for (int off = 1; off < width; off <<= 1) {
    T o = simd_shuffle_up(v, ushort(off));
    if (ll >= off) v = op(o, v);
  }
  return v;
}

// A tile of N items in threadgroup memory, or one byte where the collective exchanges none (CUB's
// size then: a kernel may lay other data out after sizeof(TempStorage)).
template <typename T, int N, bool USED>
struct ItemStorage { T items[N]; };
template <typename T, int N>
struct ItemStorage<T, N, false> { uchar unused; };

// ---- BlockExchange: blocked <-> striped / warp-striped through threadgroup memory (write,
// barrier, read; warp-wide: write, simdgroup_barrier, read). No barrier after the read: reusing
// the storage needs the caller's barrier, as in CUB.
template <typename T, int BLOCK_DIM_X, int ITEMS_PER_THREAD, bool WARP_TIME_SLICING = false,
          int BLOCK_DIM_Y = 1, int BLOCK_DIM_Z = 1>
struct BlockExchange {
  enum { BLOCK_THREADS = BLOCK_DIM_X * BLOCK_DIM_Y * BLOCK_DIM_Z, IPT = ITEMS_PER_THREAD };
  struct TempStorage { T items[BLOCK_THREADS * ITEMS_PER_THREAD]; };
  threadgroup TempStorage* s;
  int tid;
  BlockExchange(threadgroup TempStorage& storage, uint linear_tid)
      : s(&storage), tid(int(linear_tid)) {}
  // kinds: 0 blocked, 1 striped, 2 warp-striped: where item i of this thread sits in the tile
  int at(int kind, int i) const {
    int lane = tid % WARP_THREADS, base = tid / WARP_THREADS * WARP_THREADS * IPT;
    return kind == 0 ? tid * IPT + i : kind == 1 ? i * BLOCK_THREADS + tid
                                                 : base + i * WARP_THREADS + lane;
  }
  void move(thread const Items<T, ITEMS_PER_THREAD>& in, thread Items<T, ITEMS_PER_THREAD>& out, int from,
            int to) {
    T v[ITEMS_PER_THREAD];
    for (int i = 0; i < IPT; ++i) v[i] = in[i];
    for (int i = 0; i < IPT; ++i) s->items[at(from, i)] = v[i];
    if (from == 2 || to == 2) simdgroup_barrier(mem_flags::mem_threadgroup);
    else threadgroup_barrier(mem_flags::mem_threadgroup);
    for (int i = 0; i < IPT; ++i) out[i] = s->items[at(to, i)];
  }
  void StripedToBlocked(thread const Items<T, ITEMS_PER_THREAD>& in,
                        thread Items<T, ITEMS_PER_THREAD>& out) { move(in, out, 1, 0); }
  void BlockedToStriped(thread const Items<T, ITEMS_PER_THREAD>& in,
                        thread Items<T, ITEMS_PER_THREAD>& out) { move(in, out, 0, 1); }
  void WarpStripedToBlocked(thread const Items<T, ITEMS_PER_THREAD>& in,
                            thread Items<T, ITEMS_PER_THREAD>& out) { move(in, out, 2, 0); }
  void BlockedToWarpStriped(thread const Items<T, ITEMS_PER_THREAD>& in,
                            thread Items<T, ITEMS_PER_THREAD>& out) { move(in, out, 0, 2); }
  void StripedToBlocked(thread Items<T, ITEMS_PER_THREAD>& items) { move(items, items, 1, 0); }
  void BlockedToStriped(thread Items<T, ITEMS_PER_THREAD>& items) { move(items, items, 0, 1); }
  void WarpStripedToBlocked(thread Items<T, ITEMS_PER_THREAD>& items) { move(items, items, 2, 0); }
  void BlockedToWarpStriped(thread Items<T, ITEMS_PER_THREAD>& items) { move(items, items, 0, 2); }
};

// ---- BlockLoad / BlockStore: DIRECT and VECTORIZE blocked, STRIPED striped, TRANSPOSE striped
// then exchanged to blocked, WARP_TRANSPOSE warp-striped then exchanged. Guarded forms touch
// only items below valid_items; other loaded items keep what the array held (or oob_default).
template <typename T, int BLOCK_DIM_X, int ITEMS_PER_THREAD, int ALGORITHM = BLOCK_LOAD_DIRECT,
          int BLOCK_DIM_Y = 1, int BLOCK_DIM_Z = 1>
struct BlockLoad {
  enum { BLOCK_THREADS = BLOCK_DIM_X * BLOCK_DIM_Y * BLOCK_DIM_Z, IPT = ITEMS_PER_THREAD,
         KIND = (ALGORITHM == BLOCK_LOAD_STRIPED || ALGORITHM == BLOCK_LOAD_TRANSPOSE) ? 1
                : (ALGORITHM == BLOCK_LOAD_WARP_TRANSPOSE ||
                   ALGORITHM == BLOCK_LOAD_WARP_TRANSPOSE_TIMESLICED) ? 2 : 0,
         EXCHANGES = ALGORITHM == BLOCK_LOAD_TRANSPOSE || KIND == 2 };
  static_assert(KIND != 2 || BLOCK_THREADS % WARP_THREADS == 0,
                "kport_cub::BlockLoad: warp-transpose needs a block of whole SIMD-groups");
  using Exchange = BlockExchange<T, BLOCK_THREADS, ITEMS_PER_THREAD>;
  using TempStorage = ItemStorage<T, BLOCK_THREADS * ITEMS_PER_THREAD, (EXCHANGES != 0)>;
  threadgroup TempStorage* s;
  int tid;
  BlockLoad(threadgroup TempStorage& storage, uint linear_tid)
      : s(&storage), tid(int(linear_tid)) {}
  template <typename It>
  void read(It it, thread Items<T, ITEMS_PER_THREAD>& items, bool guarded, int end) {
    Exchange ex(*reinterpret_cast<threadgroup typename Exchange::TempStorage*>(s), uint(tid));
    for (int i = 0; i < IPT; ++i) {
      int p = ex.at(KIND, i);
      if (!guarded || p < end) items[i] = it[p];
    }
    if (EXCHANGES) ex.move(items, items, KIND, 0);
  }
  template <typename It>
  void Load(It it, thread Items<T, ITEMS_PER_THREAD>& items) { read(it, items, false, 0); }
  template <typename It>
  void Load(It it, thread Items<T, ITEMS_PER_THREAD>& items, int valid_items) {
    read(it, items, true, valid_items);
  }
  template <typename It, typename D>
  void Load(It it, thread Items<T, ITEMS_PER_THREAD>& items, int valid_items, D oob_default) {
    for (int i = 0; i < IPT; ++i) items[i] = T(oob_default);
    read(it, items, true, valid_items);
  }
};

template <typename T, int BLOCK_DIM_X, int ITEMS_PER_THREAD, int ALGORITHM = BLOCK_STORE_DIRECT,
          int BLOCK_DIM_Y = 1, int BLOCK_DIM_Z = 1>
struct BlockStore {
  enum { BLOCK_THREADS = BLOCK_DIM_X * BLOCK_DIM_Y * BLOCK_DIM_Z, IPT = ITEMS_PER_THREAD,
         KIND = (ALGORITHM == BLOCK_STORE_STRIPED || ALGORITHM == BLOCK_STORE_TRANSPOSE) ? 1
                : (ALGORITHM == BLOCK_STORE_WARP_TRANSPOSE ||
                   ALGORITHM == BLOCK_STORE_WARP_TRANSPOSE_TIMESLICED) ? 2 : 0,
         EXCHANGES = ALGORITHM == BLOCK_STORE_TRANSPOSE || KIND == 2 };
  static_assert(KIND != 2 || BLOCK_THREADS % WARP_THREADS == 0,
                "kport_cub::BlockStore: warp-transpose needs a block of whole SIMD-groups");
  using Exchange = BlockExchange<T, BLOCK_THREADS, ITEMS_PER_THREAD>;
  using TempStorage = ItemStorage<T, BLOCK_THREADS * ITEMS_PER_THREAD, (EXCHANGES != 0)>;
  threadgroup TempStorage* s;
  int tid;
  BlockStore(threadgroup TempStorage& storage, uint linear_tid)
      : s(&storage), tid(int(linear_tid)) {}
  // In place, as in CUB: a transposing store leaves the caller's items rearranged.
  template <typename It>
  void write(It it, thread Items<T, ITEMS_PER_THREAD>& items, bool guarded, int end) {
    Exchange ex(*reinterpret_cast<threadgroup typename Exchange::TempStorage*>(s), uint(tid));
    if (EXCHANGES) ex.move(items, items, 0, KIND);
    for (int i = 0; i < IPT; ++i) {
      int p = ex.at(KIND, i);
      if (!guarded || p < end) it[p] = items[i];
    }
  }
  template <typename It>
  void Store(It it, thread Items<T, ITEMS_PER_THREAD>& items) { write(it, items, false, 0); }
  template <typename It>
  void Store(It it, thread Items<T, ITEMS_PER_THREAD>& items, int valid_items) {
    write(it, items, true, valid_items);
  }
};

// ---- BlockReduce: a shuffle-down tree per SIMD-group, then thread 0 folds the group totals in
// order (CUB's WARP_REDUCTIONS; the RAKING algorithms compute the same reduction, the float
// rounding may differ). The result is defined in thread 0 only, as in CUB.
template <typename T, int BLOCK_DIM_X, int ALGORITHM = BLOCK_REDUCE_WARP_REDUCTIONS,
          int BLOCK_DIM_Y = 1, int BLOCK_DIM_Z = 1>
struct BlockReduce {
  enum { BLOCK_THREADS = BLOCK_DIM_X * BLOCK_DIM_Y * BLOCK_DIM_Z,
         WARPS = (BLOCK_THREADS + WARP_THREADS - 1) / WARP_THREADS };
  struct TempStorage { T warp_totals[WARPS]; };
  threadgroup TempStorage* s;
  int tid;
  BlockReduce(threadgroup TempStorage& storage, uint linear_tid)
      : s(&storage), tid(int(linear_tid)) {}
  template <typename Op>
  T reduce(T input, Op op, int num_valid, bool full) {
    int w = tid / WARP_THREADS, lane = tid % WARP_THREADS;
    int lanes = min(int(WARP_THREADS), BLOCK_THREADS - w * WARP_THREADS);
    int valid = full ? lanes : min(num_valid - w * WARP_THREADS, lanes);
    T agg = simd_tree_reduce(input, 0, lane, WARP_THREADS, valid, op);
    if (lane == 0 && w > 0 && valid > 0) s->warp_totals[w] = agg;
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if (tid == 0)
      for (int j = 1; j < WARPS && (full || j * WARP_THREADS < num_valid); ++j) {
        T next = s->warp_totals[j];  // a thread copy: user operators take `thread` references
        agg = op(agg, next);
      }
    return agg;
  }
  T Sum(T input) { return reduce(input, kport_cub::Sum(), BLOCK_THREADS, true); }
  T Sum(T input, int num_valid) {
    return reduce(input, kport_cub::Sum(), num_valid, num_valid >= BLOCK_THREADS);
  }
  template <int N>
  T Sum(thread Items<T, N>& inputs) {
    return reduce(thread_reduce(inputs, kport_cub::Sum()), kport_cub::Sum(), BLOCK_THREADS,
                  true);
  }
  template <typename Op>
  T Reduce(T input, Op op) { return reduce(input, op, BLOCK_THREADS, true); }
  template <typename Op>
  T Reduce(T input, Op op, int num_valid) {
    return reduce(input, op, num_valid, num_valid >= BLOCK_THREADS);
  }
  template <int N, typename Op>
  T Reduce(thread Items<T, N>& inputs, Op op) {
    return reduce(thread_reduce(inputs, op), op, BLOCK_THREADS, true);
  }
};

// ---- BlockScan: a shuffle-up scan per SIMD-group, the group totals through threadgroup memory,
// each group folding those before it in order (CUB's WARP_SCANS; for blocks of up to 32 threads
// every algorithm is this one). A prefix callback is called by the first SIMD-group with the
// block aggregate; what lane 0 returns prefixes the whole block. No barrier at the end: reusing
// the storage needs the caller's barrier, as in CUB.
template <typename T, int BLOCK_DIM_X, int ALGORITHM = BLOCK_SCAN_RAKING, int BLOCK_DIM_Y = 1,
          int BLOCK_DIM_Z = 1>
struct BlockScan {
  enum { BLOCK_THREADS = BLOCK_DIM_X * BLOCK_DIM_Y * BLOCK_DIM_Z,
         WARPS = (BLOCK_THREADS + WARP_THREADS - 1) / WARP_THREADS };
  struct TempStorage { T slots[WARPS + 1]; };
  struct NoCallback {
    T operator()(T v) { return v; }
  };
  threadgroup TempStorage* s;
  int tid;
  BlockScan(threadgroup TempStorage& storage, uint linear_tid)
      : s(&storage), tid(int(linear_tid)) {}
  // The block-wide scan of one value per thread: inclusive or exclusive, from `init` when
  // has_init, through the callback when has_cb; `aggregate` gets the block's total.
  template <typename Op, typename Cb>
  T scan(T input, Op op, bool inclusive, bool has_init, T init, bool has_cb, thread Cb& cb,
         thread T& aggregate) {
    int w = tid / WARP_THREADS, lane = tid % WARP_THREADS;
    int lanes = min(int(WARP_THREADS), BLOCK_THREADS - w * WARP_THREADS);
    T incl = simd_tree_scan(input, lane, lanes, op);
    T prev = simd_shuffle_up(incl, ushort(1));
    T warp_total = simd_shuffle(incl, ushort(lanes - 1));
    if (lane == lanes - 1) s->slots[w] = warp_total;
    threadgroup_barrier(mem_flags::mem_threadgroup);
    T total = s->slots[0], prefix = total;
    for (int j = 1; j < WARPS; ++j) {
      if (j == w) prefix = total;
      T next = s->slots[j];  // a thread copy: user operators take `thread` references
      total = op(total, next);
    }
    T out;
    if (inclusive) {
      out = w == 0 ? incl : op(prefix, incl);
    } else if (has_init) {
      T p = w == 0 ? init : op(init, prefix);
      out = lane == 0 ? p : op(p, prev);
    } else {
      out = w == 0 ? prev : lane == 0 ? prefix : op(prefix, prev);
    }
    if (has_cb) {
      if (w == 0) {
        T p = cb(total);
        if (lane == 0) s->slots[WARPS] = p;
      }
      threadgroup_barrier(mem_flags::mem_threadgroup);
      T p = s->slots[WARPS];
      out = (!inclusive && tid == 0) ? p : op(p, out);
    }
    aggregate = total;
    return out;
  }
  template <typename Op, typename Cb, int N>
  void scan_items(thread const Items<T, N>& in, thread Items<T, N>& out, Op op, bool inclusive,
                  bool has_init, T init, bool has_cb, thread Cb& cb, thread T& aggregate) {
    T prefix = scan(thread_reduce(in, op), op, false, has_init, init, has_cb, cb, aggregate);
    thread_scan(in, out, op, prefix, has_init || has_cb || tid != 0, inclusive);
  }
  // ---- one item per thread
  void InclusiveSum(T input, thread T& output) { InclusiveScan(input, output, kport_cub::Sum()); }
  void InclusiveSum(T input, thread T& output, thread T& block_aggregate) {
    InclusiveScan(input, output, kport_cub::Sum(), block_aggregate);
  }
  void ExclusiveSum(T input, thread T& output) {
    ExclusiveScan(input, output, T(0), kport_cub::Sum());
  }
  void ExclusiveSum(T input, thread T& output, thread T& block_aggregate) {
    ExclusiveScan(input, output, T(0), kport_cub::Sum(), block_aggregate);
  }
  template <typename Op>
  void InclusiveScan(T input, thread T& output, Op op) {
    NoCallback cb;
    T agg;
    output = scan(input, op, true, false, input, false, cb, agg);
  }
  template <typename Op>
  void InclusiveScan(T input, thread T& output, Op op, thread T& block_aggregate) {
    NoCallback cb;
    output = scan(input, op, true, false, input, false, cb, block_aggregate);
  }
  template <typename Op, typename Cb>
  void InclusiveScan(T input, thread T& output, Op op, thread Cb& block_prefix_callback_op) {
    T agg;
    output = scan(input, op, true, false, input, true, block_prefix_callback_op, agg);
  }
  template <typename Op>
  void ExclusiveScan(T input, thread T& output, T initial_value, Op op) {
    NoCallback cb;
    T agg;
    output = scan(input, op, false, true, initial_value, false, cb, agg);
  }
  template <typename Op>
  void ExclusiveScan(T input, thread T& output, T initial_value, Op op,
                     thread T& block_aggregate) {
    NoCallback cb;
    output = scan(input, op, false, true, initial_value, false, cb, block_aggregate);
  }
  template <typename Op, typename Cb>
  void ExclusiveScan(T input, thread T& output, Op op, thread Cb& block_prefix_callback_op) {
    T agg;
    output = scan(input, op, false, false, input, true, block_prefix_callback_op, agg);
  }
  // ---- ITEMS_PER_THREAD items per thread (blocked arrangement)
  template <int N>
  void InclusiveSum(thread Items<T, N>& in, thread Items<T, N>& out) {
    InclusiveScan(in, out, kport_cub::Sum());
  }
  template <int N>
  void ExclusiveSum(thread Items<T, N>& in, thread Items<T, N>& out) {
    ExclusiveScan(in, out, T(0), kport_cub::Sum());
  }
  template <int N, typename Op>
  void InclusiveScan(thread Items<T, N>& in, thread Items<T, N>& out, Op op) {
    NoCallback cb;
    T agg;
    scan_items(in, out, op, true, false, in[0], false, cb, agg);
  }
  template <int N, typename Op>
  void InclusiveScan(thread Items<T, N>& in, thread Items<T, N>& out, Op op, thread T& block_aggregate) {
    NoCallback cb;
    scan_items(in, out, op, true, false, in[0], false, cb, block_aggregate);
  }
  template <int N, typename Op, typename Cb>
  void InclusiveScan(thread Items<T, N>& in, thread Items<T, N>& out, Op op,
                     thread Cb& block_prefix_callback_op) {
    T agg;
    scan_items(in, out, op, true, false, in[0], true, block_prefix_callback_op, agg);
  }
  template <int N, typename Op>
  void ExclusiveScan(thread Items<T, N>& in, thread Items<T, N>& out, T initial_value, Op op) {
    NoCallback cb;
    T agg;
    scan_items(in, out, op, false, true, initial_value, false, cb, agg);
  }
  template <int N, typename Op, typename Cb>
  void ExclusiveScan(thread Items<T, N>& in, thread Items<T, N>& out, Op op,
                     thread Cb& block_prefix_callback_op) {
    T agg;
    scan_items(in, out, op, false, false, in[0], true, block_prefix_callback_op, agg);
  }
};

// ---- WarpReduce / WarpScan over logical warps of LOGICAL_WARP_THREADS consecutive lanes of a
// SIMD-group. WarpReduce's result is defined in each logical warp's first lane, as in CUB.
template <typename T, int LOGICAL_WARP_THREADS = WARP_THREADS>
struct WarpReduce {
  enum { L = LOGICAL_WARP_THREADS };
  struct TempStorage { uchar unused; };
  int first, ll, n;
  WarpReduce(threadgroup TempStorage&, uint linear_tid) {
    int lane = int(linear_tid) % WARP_THREADS;
    first = lane / L * L;
    ll = lane - first;
    n = min(int(L), WARP_THREADS - first);
  }
  template <typename Op>
  T Reduce(T input, Op op, int valid_items) {
    return simd_tree_reduce(input, first, ll, L, max(1, min(valid_items, n)), op);
  }
  template <typename Op>
  T Reduce(T input, Op op) { return Reduce(input, op, int(L)); }
  T Sum(T input) { return Reduce(input, kport_cub::Sum(), int(L)); }
  T Sum(T input, int valid_items) { return Reduce(input, kport_cub::Sum(), valid_items); }
};

template <typename T, int LOGICAL_WARP_THREADS = WARP_THREADS>
struct WarpScan {
  enum { L = LOGICAL_WARP_THREADS };
  struct TempStorage { uchar unused; };
  int first, ll, n;
  WarpScan(threadgroup TempStorage&, uint linear_tid) {
    int lane = int(linear_tid) % WARP_THREADS;
    first = lane / L * L;
    ll = lane - first;
    n = min(int(L), WARP_THREADS - first);
  }
  // this lane's inclusive result; prev: the lane before's; total: the logical warp's last lane's
  template <typename Op>
  T scan(T input, Op op, thread T& prev, thread T& total) {
    T incl = simd_tree_scan(input, ll, L, op);  // L: the same trip count in every lane
    prev = simd_shuffle_up(incl, ushort(1));
    total = simd_shuffle(incl, ushort(first + n - 1));
    return incl;
  }
  template <typename Op>
  void InclusiveScan(T input, thread T& out, Op op) {
    T prev, total;
    out = scan(input, op, prev, total);
  }
  template <typename Op>
  void InclusiveScan(T input, thread T& out, Op op, thread T& warp_aggregate) {
    T prev;
    out = scan(input, op, prev, warp_aggregate);
  }
  template <typename Op>
  void ExclusiveScan(T input, thread T& out, T initial_value, Op op) {
    T prev, total;
    scan(input, op, prev, total);
    out = ll == 0 ? initial_value : op(initial_value, prev);
  }
  template <typename Op>
  void ExclusiveScan(T input, thread T& out, T initial_value, Op op, thread T& warp_aggregate) {
    T prev;
    scan(input, op, prev, warp_aggregate);
    out = ll == 0 ? initial_value : op(initial_value, prev);
  }
  void InclusiveSum(T input, thread T& out) { InclusiveScan(input, out, kport_cub::Sum()); }
  void InclusiveSum(T input, thread T& out, thread T& warp_aggregate) {
    InclusiveScan(input, out, kport_cub::Sum(), warp_aggregate);
  }
  void ExclusiveSum(T input, thread T& out) {
    ExclusiveScan(input, out, T(0), kport_cub::Sum());
  }
  void ExclusiveSum(T input, thread T& out, thread T& warp_aggregate) {
    ExclusiveScan(input, out, T(0), kport_cub::Sum(), warp_aggregate);
  }
  T Broadcast(T input, uint src_lane) {
    return simd_shuffle(input, ushort(first + int(src_lane) % L));
  }
};

}  // namespace kport_cub

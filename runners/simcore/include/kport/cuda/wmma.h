// CUDA warp matrix multiply-accumulate (nvcuda::wmma from <mma.h>), the m16n16k16 subset:
// fragments of matrix_a / matrix_b (half or bfloat16, row_major or col_major) and accumulator
// (float or half), fill_fragment, load_matrix_sync, store_matrix_sync, mma_sync.
// CUDA leaves the element-to-lane layout opaque; here lane l holds row l/2, columns
// (l%2)*8 .. +7 of the logical 16x16 tile (x[i] is column (l%2)*8 + i) for every fragment kind.
// load/store/mma are warp collectives: all 32 lanes must arrive (__KP_F_DIVERGENCE otherwise).
// mma_sync exchanges the A and B elements in one rendezvous, multiplies in float and rounds once
// to the accumulator type. unconfirmed: tensor cores' internal accumulation order and precision.
#pragma once
#pragma clang system_header
#include <stdio.h>
#include <kport/rt.h>
#include <kport/cuda/bf16.h>
#include <kport/cuda/fp16.h>
#include <kport/cuda/sync.h>

namespace nvcuda {
namespace wmma {

struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };

namespace __kp_detail {
template <class A, class B>
inline constexpr bool same = false;
template <class A>
inline constexpr bool same<A, A> = true;
template <class T>
inline constexpr bool is16 = same<T, __half> || same<T, __nv_bfloat16>;
template <class T>
struct id {
  using type = T;
};

constexpr int kDim = 16, kPerLane = 8;
constexpr uint32_t kFullWarp = 0xFFFFFFFFu;

// Quiet NaN with a 0xBE payload: an element never loaded or filled shows up in results.
template <class T>
__KP_INLINE T poison() {
  if constexpr (same<T, float>) return __builtin_bit_cast(float, 0x7FFEBEBEu);
  else if constexpr (same<T, __half>) return __ushort_as_half(0x7EBE);
  else return __ushort_as_bfloat16(0x7FFE);
}

// Row and first column of lane `lane`'s 8 elements in the logical 16x16 tile.
__KP_INLINE int row_of(unsigned lane) { return int(lane / 2); }
__KP_INLINE int col0_of(unsigned lane) { return int(lane % 2) * kPerLane; }

[[gnu::cold, gnu::noinline]] inline void report_args(const char* fn, const void* p, unsigned ldm,
                                                     unsigned esize, unsigned line) {
  char msg[200];
  unsigned step = 16 / esize;  // ldm must be a multiple of 16 bytes
  if ((uintptr_t)p % 32)
    snprintf(msg, sizeof msg, "wmma::%s: pointer %p is not 256-bit (32-byte) aligned", fn, p);
  else
    snprintf(msg, sizeof msg, "wmma::%s: ldm %u is not a multiple of %u elements", fn, ldm, step);
  __kp_report(__KP_F_INVALID, line, msg);
}
__KP_INLINE void check_args(const char* fn, const void* p, unsigned ldm, unsigned esize,
                          unsigned line) {
  if (__builtin_expect((uintptr_t)p % 32 != 0 || ldm % (16 / esize) != 0, 0))
    report_args(fn, p, ldm, esize, line);
}

[[gnu::cold, gnu::noinline]] inline void report_partial(const char* fn, uint64_t mask,
                                                        unsigned line) {
  char msg[200];
  snprintf(msg, sizeof msg,
           "wmma::%s: a warp collective; all 32 lanes must take part, only lanes 0x%08x did "
           "(missing elements read as NaN)",
           fn, (unsigned)mask);
  __kp_report(__KP_F_DIVERGENCE, line, msg);
}
// Rendezvous of the warp at (line, col) publishing `size` bytes; reports a partial warp once.
__KP_INLINE uint32_t warp_round(const char* fn, const void* v, unsigned size, unsigned line,
                              unsigned col, const unsigned char** snap) {
  uint32_t got = (uint32_t)__kp_simd_sync(v, size, line, col, kFullWarp, snap);
  if (__builtin_expect(got != kFullWarp, 0) && __kp_cur->lane == (unsigned)__builtin_ctz(got))
    report_partial(fn, got, line);
  return got;
}
}  // namespace __kp_detail

template <class Use, int M, int N, int K, class T, class Layout = void>
class fragment {
  static_assert(M == 16 && N == 16 && K == 16, "kport wmma: only the m16n16k16 shape is modelled");
  static_assert(__kp_detail::same<Use, accumulator>
                    ? __kp_detail::same<Layout, void> && (__kp_detail::same<T, float> ||
                                                        __kp_detail::same<T, __half>)
                    : (__kp_detail::same<Layout, row_major> || __kp_detail::same<Layout, col_major>) &&
                          __kp_detail::is16<T>,
                "kport wmma: matrix_a/matrix_b need half or __nv_bfloat16 with row_major or "
                "col_major; accumulator needs float or half and no layout");

 public:
  enum { num_elements = __kp_detail::kPerLane };
  T x[num_elements];
  // Uninitialised on a GPU; NaN here so that a read before fill or load shows.
  fragment() {
    for (int i = 0; i < num_elements; ++i) x[i] = __kp_detail::poison<T>();
  }
};

template <class Use, int M, int N, int K, class T, class Layout>
__KP_INLINE void fill_fragment(fragment<Use, M, N, K, T, Layout>& f,
                             const typename __kp_detail::id<T>::type& v) {
  for (int i = 0; i < __kp_detail::kPerLane; ++i) f.x[i] = v;
}

// matrix_a is M x K (rows m), matrix_b is K x N (rows k); Layout says how the tile is stored.
template <class Use, int M, int N, int K, class T, class Layout>
__KP_INLINE void load_matrix_sync(fragment<Use, M, N, K, T, Layout>& f,
                                const typename __kp_detail::id<T>::type* p, unsigned ldm, __KP_SITE) {
  static_assert(!__kp_detail::same<Use, accumulator>,
                "load_matrix_sync of an accumulator takes a layout_t (mem_row_major/col_major)");
  __kp_detail::check_args("load_matrix_sync", p, ldm, sizeof(T), __kp_line);
  const bool col = __kp_detail::same<Layout, col_major>;
  int r = __kp_detail::row_of(__kp_cur->lane), c0 = __kp_detail::col0_of(__kp_cur->lane);
  for (int i = 0; i < __kp_detail::kPerLane; ++i)
    f.x[i] = col ? p[size_t(c0 + i) * ldm + r] : p[size_t(r) * ldm + c0 + i];
  const unsigned char* snap;  // loads first: the collective does not order earlier stores
  __kp_detail::warp_round("load_matrix_sync", nullptr, 0, __kp_line, __kp_col, &snap);
}

template <int M, int N, int K, class T>
__KP_INLINE void load_matrix_sync(fragment<accumulator, M, N, K, T>& f,
                                const typename __kp_detail::id<T>::type* p, unsigned ldm,
                                layout_t layout, __KP_SITE) {
  __kp_detail::check_args("load_matrix_sync", p, ldm, sizeof(T), __kp_line);
  int r = __kp_detail::row_of(__kp_cur->lane), c0 = __kp_detail::col0_of(__kp_cur->lane);
  for (int i = 0; i < __kp_detail::kPerLane; ++i)
    f.x[i] = layout == mem_col_major ? p[size_t(c0 + i) * ldm + r] : p[size_t(r) * ldm + c0 + i];
  const unsigned char* snap;
  __kp_detail::warp_round("load_matrix_sync", nullptr, 0, __kp_line, __kp_col, &snap);
}

template <int M, int N, int K, class T>
__KP_INLINE void store_matrix_sync(typename __kp_detail::id<T>::type* p,
                                 const fragment<accumulator, M, N, K, T>& f, unsigned ldm,
                                 layout_t layout, __KP_SITE) {
  __kp_detail::check_args("store_matrix_sync", p, ldm, sizeof(T), __kp_line);
  const unsigned char* snap;  // arrive first: later reads by other lanes need their own sync
  __kp_detail::warp_round("store_matrix_sync", nullptr, 0, __kp_line, __kp_col, &snap);
  int r = __kp_detail::row_of(__kp_cur->lane), c0 = __kp_detail::col0_of(__kp_cur->lane);
  for (int i = 0; i < __kp_detail::kPerLane; ++i) {
    if (layout == mem_col_major) p[size_t(c0 + i) * ldm + r] = f.x[i];
    else p[size_t(r) * ldm + c0 + i] = f.x[i];
  }
}

namespace __kp_detail {
template <class TA, class TB>
struct mma_operands {
  TA a[kPerLane];
  TB b[kPerLane];
};
static_assert(sizeof(mma_operands<__half, __half>) <= __KP_SLOT_BYTES, "one rendezvous payload");
}  // namespace __kp_detail

// d = a * b + c. Lane l computes its own 8 accumulator elements (row l/2): A's row lives in lanes
// 2*(l/2) and +1, B's row k half that l needs in lane 2k + l%2.
template <int M, int N, int K, class TD, class TA, class LA, class TB, class LB, class TC>
__KP_INLINE void mma_sync(fragment<accumulator, M, N, K, TD>& d,
                        const fragment<matrix_a, M, N, K, TA, LA>& a,
                        const fragment<matrix_b, M, N, K, TB, LB>& b,
                        const fragment<accumulator, M, N, K, TC>& c, bool satf = false, __KP_SITE) {
  using namespace __kp_detail;
  static_assert(same<TA, TB>, "mma_sync: matrix_a and matrix_b must have the same element type");
  static_assert(same<TD, TC> || same<TD, float> || same<TD, __half>, "mma_sync: accumulators");
  mma_operands<TA, TB> mine;
  for (int i = 0; i < kPerLane; ++i) mine.a[i] = a.x[i], mine.b[i] = b.x[i];
  const unsigned char* snap;
  uint32_t got = warp_round("mma_sync", &mine, sizeof mine, __kp_line, __kp_col, &snap);
  auto part = [&](unsigned lane) -> mma_operands<TA, TB> {
    mma_operands<TA, TB> v;
    if ((got >> lane) & 1u) {
      __builtin_memcpy(&v, snap + lane * __KP_SLOT_BYTES, sizeof v);
    } else {
      for (int i = 0; i < kPerLane; ++i) v.a[i] = poison<TA>(), v.b[i] = poison<TB>();
    }
    return v;
  };
  unsigned lane = __kp_cur->lane;
  int r = row_of(lane);
  float arow[kDim], acc[kPerLane];
  for (int h = 0; h < 2; ++h) {
    mma_operands<TA, TB> v = part(unsigned(2 * r + h));
    for (int i = 0; i < kPerLane; ++i) arow[h * kPerLane + i] = float(v.a[i]);
  }
  for (int i = 0; i < kPerLane; ++i) acc[i] = float(c.x[i]);
  for (int k = 0; k < kDim; ++k) {  // products of 16-bit values are exact in float
    mma_operands<TA, TB> v = part(unsigned(2 * k) + lane % 2);
    for (int i = 0; i < kPerLane; ++i) acc[i] += arow[k] * float(v.b[i]);
  }
  for (int i = 0; i < kPerLane; ++i) {
    float s = acc[i], top = same<TD, float> ? __FLT_MAX__ : 65504.0f;
    if (satf) s = s != s ? 0.0f : (s < -top ? -top : (s > top ? top : s));  // to finite; NaN -> 0
    d.x[i] = TD(s);
  }
}

}  // namespace wmma
}  // namespace nvcuda

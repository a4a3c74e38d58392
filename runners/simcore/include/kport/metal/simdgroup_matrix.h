// simdgroup_matrix<T, 8, 8>: an 8x8 matrix spread over the 32 lanes of a SIMD-group, 2 elements
// per lane in the layout MLX relies on (steel/gemm/mma.h MMAFrag::get_coord): lane l, q = l/4,
// holds row (q&4) + (l/2)%4 and columns (q&2)*2 + (l%2)*2 and +1. Loads and stores are per lane;
// multiplies exchange elements through one rendezvous of all 32 lanes.
#pragma once
#pragma clang system_header
#include "simd.h"

namespace __kp {

struct sg_coord {
  int row, col;  // col is the first of the lane's two adjacent columns
};
__KP_INLINE constexpr sg_coord sg_coord_of(int lane) {
  int q = lane / 4;
  return {(q & 4) + (lane / 2) % 4, (q & 2) * 2 + (lane % 2) * 2};
}
// Which lane holds (row, col) (col even): the inverse of sg_coord_of.
struct sg_lane_table {
  signed char lane[8][4];
  constexpr sg_lane_table() : lane{} {
    for (int l = 0; l < __KP_SIMD_WIDTH; ++l) lane[sg_coord_of(l).row][sg_coord_of(l).col / 2] = char(l);
  }
};
inline constexpr sg_lane_table sg_lanes{};

// Offset of element (row, col) of an 8x8 tile in memory (see simdgroup_load).
__KP_INLINE ulong sg_offset(int row, int col, ulong elements_per_row, ulong2 origin, bool transpose) {
  return transpose ? (origin.x + ulong(col)) * elements_per_row + origin.y + ulong(row)
                   : (origin.y + ulong(row)) * elements_per_row + origin.x + ulong(col);
}

template <class T>
concept sg_elem = is_same_v<T, float> || is_same_v<T, half> || is_same_v<T, bfloat>;

}  // namespace __kp

namespace metal {

template <class T, int Cols, int Rows = Cols>
struct simdgroup_matrix {
  static_assert(Cols == 8 && Rows == 8, "simdgroup_matrix: Apple GPUs have only 8x8");
  static_assert(__kp::sg_elem<T>, "simdgroup_matrix: element type must be float, half or bfloat");
  vec<T, 2> __kp_elems;

  // Uninitialised on hardware; NaN here so that a read before any fill shows.
  simdgroup_matrix() : __kp_elems(numeric_limits<T>::quiet_NaN()) {}
  // Diagonal matrix with `d` on the diagonal.
  explicit simdgroup_matrix(T d) {
    __kp::sg_coord c = __kp::sg_coord_of(int(__kp_cur->lane));
    __kp_elems = vec<T, 2>(T(0));
    if (c.row == c.col) __kp_elems[0] = d;
    if (c.row == c.col + 1) __kp_elems[1] = d;
  }
  // This lane's two elements (row, col) and (row, col + 1).
  vec<T, 2>& thread_elements() { return __kp_elems; }
  const vec<T, 2>& thread_elements() const { return __kp_elems; }
};
using simdgroup_float8x8 = simdgroup_matrix<float, 8, 8>;
using simdgroup_half8x8 = simdgroup_matrix<half, 8, 8>;
using simdgroup_bfloat8x8 = simdgroup_matrix<bfloat, 8, 8>;

template <class T, int Cols, int Rows = Cols>
__KP_INLINE simdgroup_matrix<T, Cols, Rows> make_filled_simdgroup_matrix(__kp::nodeduce_t<T> value) {
  simdgroup_matrix<T, Cols, Rows> m;
  m.__kp_elems = vec<T, 2>(value);
  return m;
}

// Element (r, c) is src[(origin.y + r) * elements_per_row + origin.x + c]; transposed, it is
// src[(origin.x + c) * elements_per_row + origin.y + r]. origin is (x = column, y = row).
// unconfirmed: how Apple applies origin together with transpose_matrix (this follows
// metal-flash-attention's simdgroup_matrix_storage, which mirrors the builtin).
template <class T, int C, int R>
__KP_INLINE void simdgroup_load(simdgroup_matrix<T, C, R>& d, const __kp::nodeduce_t<T>* src,
                              ulong elements_per_row = C, ulong2 matrix_origin = ulong2(0),
                              bool transpose_matrix = false) {
  __kp::sg_coord c = __kp::sg_coord_of(int(__kp_cur->lane));
  for (int k = 0; k < 2; ++k)
    d.__kp_elems[k] = src[__kp::sg_offset(c.row, c.col + k, elements_per_row, matrix_origin,
                                      transpose_matrix)];
}
template <class T, int C, int R>
__KP_INLINE void simdgroup_store(const simdgroup_matrix<T, C, R>& a, __kp::nodeduce_t<T>* dst,
                               ulong elements_per_row = C, ulong2 matrix_origin = ulong2(0),
                               bool transpose_matrix = false) {
  __kp::sg_coord c = __kp::sg_coord_of(int(__kp_cur->lane));
  for (int k = 0; k < 2; ++k)
    dst[__kp::sg_offset(c.row, c.col + k, elements_per_row, matrix_origin, transpose_matrix)] =
        a.__kp_elems[k];
}
#ifdef __KP_ADDRESS_SPACES  // the check unit type-checks calls only: declarations suffice
#define __KP_SG_SPACE(S)                                                                       \
  template <class T, int C, int R>                                                             \
  void simdgroup_load(simdgroup_matrix<T, C, R>& d, const S __kp::nodeduce_t<T>* src,          \
                      ulong = C, ulong2 = ulong2(0), bool = false);                            \
  template <class T, int C, int R>                                                             \
  void simdgroup_store(const simdgroup_matrix<T, C, R>& a, S __kp::nodeduce_t<T>* dst,         \
                       ulong = C, ulong2 = ulong2(0), bool = false);
__KP_SG_SPACE(__KP_DEVICE)
__KP_SG_SPACE(__KP_THREADGROUP)
#undef __KP_SG_SPACE
#endif

}  // namespace metal

namespace __kp {

__KP_COLD inline void report_partial(const char* fn, uint64_t mask, site s) {
  text t;
  t << fn << ": all 32 lanes of the SIMD-group must take part; only "
    << __builtin_popcountll(mask) << " did (missing lanes read as NaN)";
  report(__KP_F_DIVERGENCE, s, t);
}

template <class TA, class TB>
struct sg_operands {
  metal::vec<TA, 2> a;
  metal::vec<TB, 2> b;
};

// d = a * b (+ c): products and sums in float, rounded once to d's type.
// unconfirmed: the accumulation precision and order of Apple's half/bfloat multiply.
template <class TD, class TA, class TB, class TC, bool kAccumulate>
__KP_OUTLINE void sg_multiply(const char* fn, metal::simdgroup_matrix<TD, 8, 8>& d,
                           const metal::simdgroup_matrix<TA, 8, 8>& a,
                           const metal::simdgroup_matrix<TB, 8, 8>& b,
                           const metal::simdgroup_matrix<TC, 8, 8>* c, site s) {
  sg_operands<TA, TB> mine{a.__kp_elems, b.__kp_elems};
  simd_round r = rendezvous(mine, s);
  if (r.mask != 0xFFFFFFFFull && my_lane() == r.first()) report_partial(fn, r.mask, s);
  auto fetch = [&](int lane) -> sg_operands<TA, TB> {
    if (r.active(lane)) return r.at<sg_operands<TA, TB>>(lane);
    return {poison<metal::vec<TA, 2>>(), poison<metal::vec<TB, 2>>()};
  };
  sg_coord me = sg_coord_of(my_lane());
  float arow[8];
  for (int p = 0; p < 4; ++p) {
    metal::vec<TA, 2> pair = fetch(sg_lanes.lane[me.row][p]).a;
    arow[2 * p] = float(pair[0]);
    arow[2 * p + 1] = float(pair[1]);
  }
  float sum[2] = {0.0f, 0.0f};  // accumulator first, then the 8 products in k order
  if constexpr (kAccumulate) {
    sum[0] = float(c->__kp_elems[0]);
    sum[1] = float(c->__kp_elems[1]);
  }
  for (int j = 0; j < 8; ++j) {
    metal::vec<TB, 2> bj = fetch(sg_lanes.lane[j][me.col / 2]).b;  // B[j][col], B[j][col+1]
    sum[0] += arow[j] * float(bj[0]);
    sum[1] += arow[j] * float(bj[1]);
  }
  d.__kp_elems[0] = TD(sum[0]);
  d.__kp_elems[1] = TD(sum[1]);
}

}  // namespace __kp

namespace metal {

template <class TD, class TA, class TB>
__KP_INLINE void simdgroup_multiply(simdgroup_matrix<TD, 8, 8>& d,
                                  const simdgroup_matrix<TA, 8, 8>& a,
                                  const simdgroup_matrix<TB, 8, 8>& b, __kp::site s = __KP_HERE) {
  __kp::sg_multiply<TD, TA, TB, TD, false>("simdgroup_multiply", d, a, b, nullptr, s);
}
template <class TD, class TA, class TB, class TC>
__KP_INLINE void simdgroup_multiply_accumulate(simdgroup_matrix<TD, 8, 8>& d,
                                             const simdgroup_matrix<TA, 8, 8>& a,
                                             const simdgroup_matrix<TB, 8, 8>& b,
                                             const simdgroup_matrix<TC, 8, 8>& c,
                                             __kp::site s = __KP_HERE) {
  __kp::sg_multiply<TD, TA, TB, TC, true>("simdgroup_multiply_accumulate", d, a, b, &c, s);
}

}  // namespace metal

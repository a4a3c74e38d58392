// The simd_* and quad_* functions of <metal_simdgroup> (included by simd.h). Each takes a
// trailing __kp::site defaulted to the call site, which names the rendezvous.
#pragma once
#pragma clang system_header

namespace metal {

// ---- reductions and scans (over the active lanes) -------------------------------------------------
#define __KP_REDUCE(name, req, span, op)                                             \
  template <class X>                                                               \
    requires __kp::req<X>                                                            \
  __KP_INLINE __kp::simd_t<X> name(X x, __kp::site s = __KP_HERE) {                        \
    return __kp::reduce(__kp::simd_t<X>(x), s, __kp::span(), __kp::op{});                  \
  }
#define __KP_SCAN(name, span, op, inclusive, identity)                               \
  template <class X>                                                               \
    requires __kp::simd_value<X>                                                     \
  __KP_INLINE __kp::simd_t<X> name(X x, __kp::site s = __KP_HERE) {                        \
    return __kp::scan(__kp::simd_t<X>(x), s, __kp::span(), __kp::op{}, inclusive,          \
                    __kp::elem_t<__kp::simd_t<X>>(identity));                          \
  }
#define __KP_REDUCE_FAMILY(prefix, span)                                             \
  __KP_REDUCE(prefix##_sum, simd_value, span, op_sum)                                \
  __KP_REDUCE(prefix##_product, simd_value, span, op_product)                        \
  __KP_REDUCE(prefix##_min, simd_value, span, op_min)                                \
  __KP_REDUCE(prefix##_max, simd_value, span, op_max)                                \
  __KP_REDUCE(prefix##_and, simd_int, span, op_and)                                  \
  __KP_REDUCE(prefix##_or, simd_int, span, op_or)                                    \
  __KP_REDUCE(prefix##_xor, simd_int, span, op_xor)                                  \
  __KP_SCAN(prefix##_prefix_inclusive_sum, span, op_sum, true, 0)                    \
  __KP_SCAN(prefix##_prefix_exclusive_sum, span, op_sum, false, 0)                   \
  __KP_SCAN(prefix##_prefix_inclusive_product, span, op_product, true, 1)            \
  __KP_SCAN(prefix##_prefix_exclusive_product, span, op_product, false, 1)
__KP_REDUCE_FAMILY(simd, simd_span)
__KP_REDUCE_FAMILY(quad, quad_span)
#undef __KP_REDUCE_FAMILY
#undef __KP_REDUCE
#undef __KP_SCAN

// ---- shuffles --------------------------------------------------------------------------------
#define __KP_SHUFFLE(name, kind)                                                               \
  template <class X>                                                                         \
    requires __kp::simd_value<X>                                                               \
  __KP_INLINE __kp::simd_t<X> name(X data, ushort arg, __kp::site s = __KP_HERE) {                   \
    return __kp::shuffle(__kp::kind, __kp::simd_t<X>(data), arg, s);                               \
  }
__KP_SHUFFLE(simd_shuffle, simd_lane)
__KP_SHUFFLE(simd_shuffle_xor, simd_xor)
__KP_SHUFFLE(simd_shuffle_up, simd_up)
__KP_SHUFFLE(simd_shuffle_down, simd_down)
__KP_SHUFFLE(simd_shuffle_rotate_up, simd_rot_up)
__KP_SHUFFLE(simd_shuffle_rotate_down, simd_rot_down)
__KP_SHUFFLE(simd_broadcast, simd_bcast)
__KP_SHUFFLE(quad_shuffle, quad_lane)
__KP_SHUFFLE(quad_shuffle_xor, quad_xor)
__KP_SHUFFLE(quad_shuffle_up, quad_up)
__KP_SHUFFLE(quad_shuffle_down, quad_down)
__KP_SHUFFLE(quad_shuffle_rotate_up, quad_rot_up)
__KP_SHUFFLE(quad_shuffle_rotate_down, quad_rot_down)
__KP_SHUFFLE(quad_broadcast, quad_bcast)
#undef __KP_SHUFFLE

// The value of the lowest active lane (of the SIMD-group, or of the caller's quad).
template <class X>
  requires __kp::simd_value<X>
__KP_INLINE __kp::simd_t<X> simd_broadcast_first(X data, __kp::site s = __KP_HERE) {
  return __kp::shuffle(__kp::simd_first, __kp::simd_t<X>(data), 0, s);
}
template <class X>
  requires __kp::simd_value<X>
__KP_INLINE __kp::simd_t<X> quad_broadcast_first(X data, __kp::site s = __KP_HERE) {
  return __kp::shuffle(__kp::quad_first, __kp::simd_t<X>(data), 0, s);
}

#define __KP_FILL(name, up, width)                                                             \
  template <class X>                                                                         \
    requires __kp::simd_value<X>                                                               \
  __KP_INLINE __kp::simd_t<X> name(X data, __kp::nodeduce_t<X> filling, ushort delta,             \
                               __kp::site s = __KP_HERE) {                                       \
    return __kp::shuffle_fill(#name, up, __kp::simd_t<X>(data), __kp::simd_t<X>(filling), delta,   \
                            width, width, s);                                                \
  }                                                                                          \
  template <class X>                                                                         \
    requires __kp::simd_value<X>                                                               \
  __KP_INLINE __kp::simd_t<X> name(X data, __kp::nodeduce_t<X> filling, ushort delta,             \
                               ushort modulo, __kp::site s = __KP_HERE) {                        \
    return __kp::shuffle_fill(#name, up, __kp::simd_t<X>(data), __kp::simd_t<X>(filling), delta,   \
                            modulo, width, s);                                               \
  }
__KP_FILL(simd_shuffle_and_fill_up, true, __KP_SIMD_WIDTH)
__KP_FILL(simd_shuffle_and_fill_down, false, __KP_SIMD_WIDTH)
__KP_FILL(quad_shuffle_and_fill_up, true, 4)
__KP_FILL(quad_shuffle_and_fill_down, false, 4)
#undef __KP_FILL

// ---- votes ----------------------------------------------------------------------------------
// Ballot result: bit l set when lane l was active and voted true.
struct simd_vote {
  using vote_t = uint64_t;
  vote_t bits;
  constexpr explicit simd_vote(vote_t v = 0) : bits(v) {}
  constexpr explicit operator vote_t() const { return bits; }
  // unconfirmed: "all threads in the SIMD-group" read as every lane that exists in it, so lanes
  // that exited early make all() false.
  bool all() const {
    vote_t lanes = __kp_cur->simd_lanes >= 64 ? ~vote_t(0) : (vote_t(1) << __kp_cur->simd_lanes) - 1;
    return (bits & lanes) == lanes;
  }
  constexpr bool any() const { return bits != 0; }
};
// Quad ballot: bit i for lane i of the caller's quad. unconfirmed: the width of vote_t.
struct quad_vote {
  using vote_t = uint16_t;
  vote_t bits;
  constexpr explicit quad_vote(vote_t v = 0) : bits(v) {}
  constexpr explicit operator vote_t() const { return bits; }
  bool all() const {
    int base = int(__kp_cur->lane) & ~3;
    int exist = int(__kp_cur->simd_lanes) - base;
    vote_t lanes = vote_t(exist >= 4 ? 0xF : (1 << exist) - 1);
    return (bits & lanes) == lanes;
  }
  constexpr bool any() const { return bits != 0; }
};

__KP_COLLECTIVE inline simd_vote simd_ballot(bool pred, __kp::site s = __KP_HERE) {
  __kp::simd_round r = __kp::rendezvous(pred, s);
  uint64_t v = 0;
  for (int l = 0; l < __KP_SIMD_WIDTH; ++l)
    if (r.active(l) && r.at<bool>(l)) v |= uint64_t(1) << l;
  return simd_vote(v);
}
__KP_INLINE quad_vote quad_ballot(bool pred, __kp::site s = __KP_HERE) {
  int base = int(__kp_cur->lane) & ~3;
  uint64_t all = uint64_t(simd_ballot(pred, s));
  return quad_vote(quad_vote::vote_t((all >> base) & 0xF));
}
__KP_INLINE simd_vote simd_active_threads_mask(__kp::site s = __KP_HERE) {
  return simd_vote(__kp::rendezvous(s).mask);
}
__KP_INLINE quad_vote quad_active_threads_mask(__kp::site s = __KP_HERE) {
  int base = int(__kp_cur->lane) & ~3;
  return quad_vote(quad_vote::vote_t((__kp::rendezvous(s).mask >> base) & 0xF));
}
// simd_all/simd_any: over the active lanes only.
__KP_COLLECTIVE inline bool simd_all(bool pred, __kp::site s = __KP_HERE) {
  __kp::simd_round r = __kp::rendezvous(pred, s);
  for (int l = 0; l < __KP_SIMD_WIDTH; ++l)
    if (r.active(l) && !r.at<bool>(l)) return false;
  return true;
}
__KP_INLINE bool simd_any(bool pred, __kp::site s = __KP_HERE) {
  return uint64_t(simd_ballot(pred, s)) != 0;
}
__KP_COLLECTIVE inline bool quad_all(bool pred, __kp::site s = __KP_HERE) {
  int base = int(__kp_cur->lane) & ~3;
  __kp::simd_round r = __kp::rendezvous(pred, s);
  for (int l = base; l < base + 4; ++l)
    if (r.active(l) && !r.at<bool>(l)) return false;
  return true;
}
__KP_INLINE bool quad_any(bool pred, __kp::site s = __KP_HERE) {
  return quad_vote::vote_t(quad_ballot(pred, s)) != 0;
}
__KP_INLINE bool simd_is_first(__kp::site s = __KP_HERE) {
  return __kp::rendezvous(s).first() == int(__kp_cur->lane);
}
__KP_INLINE bool quad_is_first(__kp::site s = __KP_HERE) {
  int base = int(__kp_cur->lane) & ~3;
  uint64_t quad = (__kp::rendezvous(s).mask >> base) & 0xF;
  return base + __builtin_ctzll(quad) == int(__kp_cur->lane);
}
// Compute kernels have no helper threads.
__KP_INLINE bool simd_is_helper_thread() { return false; }
__KP_INLINE bool quad_is_helper_thread() { return false; }

}  // namespace metal

// The simd_* and quad_* functions of <metal_simdgroup> (included by simd.h). Each takes a
// trailing kp::site defaulted to the call site, which names the rendezvous.
#pragma once
#pragma clang system_header

namespace metal {

// ---- reductions and scans (over the active lanes) -------------------------------------------------
#define KP_REDUCE(name, req, span, op)                                             \
  template <class X>                                                               \
    requires kp::req<X>                                                            \
  KP_INLINE kp::simd_t<X> name(X x, kp::site s = KP_HERE) {                        \
    return kp::reduce(kp::simd_t<X>(x), s, kp::span(), kp::op{});                  \
  }
#define KP_SCAN(name, span, op, inclusive, identity)                               \
  template <class X>                                                               \
    requires kp::simd_value<X>                                                     \
  KP_INLINE kp::simd_t<X> name(X x, kp::site s = KP_HERE) {                        \
    return kp::scan(kp::simd_t<X>(x), s, kp::span(), kp::op{}, inclusive,          \
                    kp::elem_t<kp::simd_t<X>>(identity));                          \
  }
#define KP_REDUCE_FAMILY(prefix, span)                                             \
  KP_REDUCE(prefix##_sum, simd_value, span, op_sum)                                \
  KP_REDUCE(prefix##_product, simd_value, span, op_product)                        \
  KP_REDUCE(prefix##_min, simd_value, span, op_min)                                \
  KP_REDUCE(prefix##_max, simd_value, span, op_max)                                \
  KP_REDUCE(prefix##_and, simd_int, span, op_and)                                  \
  KP_REDUCE(prefix##_or, simd_int, span, op_or)                                    \
  KP_REDUCE(prefix##_xor, simd_int, span, op_xor)                                  \
  KP_SCAN(prefix##_prefix_inclusive_sum, span, op_sum, true, 0)                    \
  KP_SCAN(prefix##_prefix_exclusive_sum, span, op_sum, false, 0)                   \
  KP_SCAN(prefix##_prefix_inclusive_product, span, op_product, true, 1)            \
  KP_SCAN(prefix##_prefix_exclusive_product, span, op_product, false, 1)
KP_REDUCE_FAMILY(simd, simd_span)
KP_REDUCE_FAMILY(quad, quad_span)
#undef KP_REDUCE_FAMILY
#undef KP_REDUCE
#undef KP_SCAN

// ---- shuffles --------------------------------------------------------------------------------
#define KP_SHUFFLE(name, kind)                                                               \
  template <class X>                                                                         \
    requires kp::simd_value<X>                                                               \
  KP_INLINE kp::simd_t<X> name(X data, ushort arg, kp::site s = KP_HERE) {                   \
    return kp::shuffle(kp::kind, kp::simd_t<X>(data), arg, s);                               \
  }
KP_SHUFFLE(simd_shuffle, simd_lane)
KP_SHUFFLE(simd_shuffle_xor, simd_xor)
KP_SHUFFLE(simd_shuffle_up, simd_up)
KP_SHUFFLE(simd_shuffle_down, simd_down)
KP_SHUFFLE(simd_shuffle_rotate_up, simd_rot_up)
KP_SHUFFLE(simd_shuffle_rotate_down, simd_rot_down)
KP_SHUFFLE(simd_broadcast, simd_bcast)
KP_SHUFFLE(quad_shuffle, quad_lane)
KP_SHUFFLE(quad_shuffle_xor, quad_xor)
KP_SHUFFLE(quad_shuffle_up, quad_up)
KP_SHUFFLE(quad_shuffle_down, quad_down)
KP_SHUFFLE(quad_shuffle_rotate_up, quad_rot_up)
KP_SHUFFLE(quad_shuffle_rotate_down, quad_rot_down)
KP_SHUFFLE(quad_broadcast, quad_bcast)
#undef KP_SHUFFLE

// The value of the lowest active lane (of the SIMD-group, or of the caller's quad).
template <class X>
  requires kp::simd_value<X>
KP_INLINE kp::simd_t<X> simd_broadcast_first(X data, kp::site s = KP_HERE) {
  return kp::shuffle(kp::simd_first, kp::simd_t<X>(data), 0, s);
}
template <class X>
  requires kp::simd_value<X>
KP_INLINE kp::simd_t<X> quad_broadcast_first(X data, kp::site s = KP_HERE) {
  return kp::shuffle(kp::quad_first, kp::simd_t<X>(data), 0, s);
}

#define KP_FILL(name, up, width)                                                             \
  template <class X>                                                                         \
    requires kp::simd_value<X>                                                               \
  KP_INLINE kp::simd_t<X> name(X data, kp::nodeduce_t<X> filling, ushort delta,             \
                               kp::site s = KP_HERE) {                                       \
    return kp::shuffle_fill(#name, up, kp::simd_t<X>(data), kp::simd_t<X>(filling), delta,   \
                            width, width, s);                                                \
  }                                                                                          \
  template <class X>                                                                         \
    requires kp::simd_value<X>                                                               \
  KP_INLINE kp::simd_t<X> name(X data, kp::nodeduce_t<X> filling, ushort delta,             \
                               ushort modulo, kp::site s = KP_HERE) {                        \
    return kp::shuffle_fill(#name, up, kp::simd_t<X>(data), kp::simd_t<X>(filling), delta,   \
                            modulo, width, s);                                               \
  }
KP_FILL(simd_shuffle_and_fill_up, true, KP_SIMD_WIDTH)
KP_FILL(simd_shuffle_and_fill_down, false, KP_SIMD_WIDTH)
KP_FILL(quad_shuffle_and_fill_up, true, 4)
KP_FILL(quad_shuffle_and_fill_down, false, 4)
#undef KP_FILL

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
    vote_t lanes = kp_cur->simd_lanes >= 64 ? ~vote_t(0) : (vote_t(1) << kp_cur->simd_lanes) - 1;
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
    int base = int(kp_cur->lane) & ~3;
    int exist = int(kp_cur->simd_lanes) - base;
    vote_t lanes = vote_t(exist >= 4 ? 0xF : (1 << exist) - 1);
    return (bits & lanes) == lanes;
  }
  constexpr bool any() const { return bits != 0; }
};

KP_OUTLINE inline simd_vote simd_ballot(bool pred, kp::site s = KP_HERE) {
  kp::simd_round r = kp::rendezvous(pred, s);
  uint64_t v = 0;
  for (int l = 0; l < KP_SIMD_WIDTH; ++l)
    if (r.active(l) && r.at<bool>(l)) v |= uint64_t(1) << l;
  return simd_vote(v);
}
KP_INLINE quad_vote quad_ballot(bool pred, kp::site s = KP_HERE) {
  int base = int(kp_cur->lane) & ~3;
  uint64_t all = uint64_t(simd_ballot(pred, s));
  return quad_vote(quad_vote::vote_t((all >> base) & 0xF));
}
KP_INLINE simd_vote simd_active_threads_mask(kp::site s = KP_HERE) {
  return simd_vote(kp::rendezvous(s).mask);
}
KP_INLINE quad_vote quad_active_threads_mask(kp::site s = KP_HERE) {
  int base = int(kp_cur->lane) & ~3;
  return quad_vote(quad_vote::vote_t((kp::rendezvous(s).mask >> base) & 0xF));
}
// simd_all/simd_any: over the active lanes only.
KP_OUTLINE inline bool simd_all(bool pred, kp::site s = KP_HERE) {
  kp::simd_round r = kp::rendezvous(pred, s);
  for (int l = 0; l < KP_SIMD_WIDTH; ++l)
    if (r.active(l) && !r.at<bool>(l)) return false;
  return true;
}
KP_INLINE bool simd_any(bool pred, kp::site s = KP_HERE) {
  return uint64_t(simd_ballot(pred, s)) != 0;
}
KP_OUTLINE inline bool quad_all(bool pred, kp::site s = KP_HERE) {
  int base = int(kp_cur->lane) & ~3;
  kp::simd_round r = kp::rendezvous(pred, s);
  for (int l = base; l < base + 4; ++l)
    if (r.active(l) && !r.at<bool>(l)) return false;
  return true;
}
KP_INLINE bool quad_any(bool pred, kp::site s = KP_HERE) {
  return quad_vote::vote_t(quad_ballot(pred, s)) != 0;
}
KP_INLINE bool simd_is_first(kp::site s = KP_HERE) {
  return kp::rendezvous(s).first() == int(kp_cur->lane);
}
KP_INLINE bool quad_is_first(kp::site s = KP_HERE) {
  int base = int(kp_cur->lane) & ~3;
  uint64_t quad = (kp::rendezvous(s).mask >> base) & 0xF;
  return base + __builtin_ctzll(quad) == int(kp_cur->lane);
}
// Compute kernels have no helper threads.
KP_INLINE bool simd_is_helper_thread() { return false; }
KP_INLINE bool quad_is_helper_thread() { return false; }

}  // namespace metal

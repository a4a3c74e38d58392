// Barriers and SIMD-group / quad-group functions. Every collective is a rendezvous of the lanes
// of one SIMD-group at the kernel's call site (__kp_simd_sync); the lanes that arrive are the active
// set, over which reductions and scans run. Reading a lane that does not exist or is not active
// is undefined on Apple GPUs: it returns a poison value (NaN, or 0xBE bytes) and is reported.
#pragma once
#pragma clang system_header
#include "convert.h"
#include "report.h"

namespace metal {

enum class mem_flags : unsigned {
  mem_none = 0,
  mem_device = 1,
  mem_threadgroup = 2,
  mem_texture = 4,
  mem_threadgroup_imageblock = 8,
  mem_object_data = 16,
};
constexpr mem_flags operator|(mem_flags a, mem_flags b) { return mem_flags(unsigned(a) | unsigned(b)); }
constexpr mem_flags operator&(mem_flags a, mem_flags b) { return mem_flags(unsigned(a) & unsigned(b)); }

// Every thread of the threadgroup must reach the same barrier (the runtime checks that).
__KP_INLINE void threadgroup_barrier(mem_flags, __kp::site s = __KP_HERE) {
  __kp_barrier(s.line, s.col, 0, 0);
}
__KP_INLINE void simdgroup_barrier(mem_flags, __kp::site s = __KP_HERE) {
  const unsigned char* snap;
  __kp_simd_sync(nullptr, 0, s.line, s.col, 0, &snap);
}

}  // namespace metal

namespace __kp {

// Operand types of the native simd functions: 8/16/32-bit ints, half, float (and bfloat, which
// MLX's prelude adds), scalars or vectors. bool promotes to int, as with Metal's overloads.
template <class E>
concept simd_elem = is_same_v<E, float> || is_same_v<E, half> || is_same_v<E, bfloat> ||
                    (int_scalar<E> && sizeof(E) <= 4);
template <class X>
using simd_t = conditional_t<is_same_v<X, bool>, int, X>;
template <class X>
concept simd_value = simd_elem<elem_t<simd_t<X>>> && (!vinfo<X>::is_vector || ext_vector<X>);
template <class X>
concept simd_int = simd_value<X> && int_scalar<elem_t<simd_t<X>>>;

// One rendezvous: which lanes took part, and what each published.
struct simd_round {
  uint64_t mask;
  const unsigned char* slots;
  __KP_INLINE bool active(int l) const { return l >= 0 && l < __KP_SIMD_WIDTH && ((mask >> l) & 1); }
  __KP_INLINE int first() const { return mask ? __builtin_ctzll(mask) : -1; }
  template <class P>
  __KP_INLINE P at(int l) const {
    P p;
    __builtin_memcpy(&p, slots + l * __KP_SLOT_BYTES, sizeof(P));
    return p;
  }
};

template <class P>
__KP_INLINE simd_round rendezvous(const P& payload, site s) {
  static_assert(sizeof(P) <= __KP_SLOT_BYTES, "simd function operand too large for one lane slot");
  const unsigned char* snap = nullptr;
  uint64_t m = __kp_simd_sync(&payload, sizeof(P), s.line, s.col, 0, &snap);
  return {m, snap};
}
__KP_INLINE simd_round rendezvous(site s) {
  const unsigned char* snap = nullptr;
  uint64_t m = __kp_simd_sync(nullptr, 0, s.line, s.col, 0, &snap);
  return {m, snap};
}
__KP_INLINE int my_lane() { return int(__kp_cur->lane); }

// What an undefined read returns: NaN in floating lanes, 0xBEBEBEBE bits in integer lanes.
template <class T>
__KP_INLINE T poison() {
  T r;
  if constexpr (fp_scalar<elem_t<T>>)
    r = T(metal::numeric_limits<elem_t<T>>::quiet_NaN());
  else
    __builtin_memset(&r, 0xBE, sizeof r);
  return r;
}

__KP_COLD inline void report_bad_source(const char* fn, int src, site s) {
  text t;
  t << fn << ": lane " << my_lane() << " reads lane " << src;
  if (src < 0 || src >= int(__kp_cur->simd_lanes))
    t << ", which does not exist in this SIMD-group";
  else
    t << ", which is not active here (exited or in another branch)";
  t << "; undefined on Apple GPUs (returned NaN / 0xBE bytes)";
  report(__KP_F_INVALID, s, t);
}
__KP_COLD inline void report_bad_arg(const char* fn, const char* what, long v, site s) {
  text t;
  t << fn << ": " << what << " " << v << " is out of range; undefined on Apple GPUs";
  report(__KP_F_INVALID, s, t);
}
__KP_COLD inline void report_nonuniform(const char* fn, const char* what, int l1, unsigned v1,
                                      int l2, unsigned v2, site s) {
  text t;
  t << fn << ": " << what << " must be the same in all active lanes (lane " << l1 << " has "
    << v1 << ", lane " << l2 << " has " << v2 << ")";
  report(__KP_F_INVALID, s, t);
}

// Arguments Metal requires to be the same in all active lanes (delta, mask, broadcast lane).
// Checked by the lowest active lane so that one mismatch is reported once.
template <class M>
__KP_INLINE void check_uniform(const char* fn, const char* what, const simd_round& r,
                             unsigned M::*field, site s) {
  if (my_lane() != r.first()) return;
  unsigned mine = r.at<M>(my_lane()).*field;
  for (int l = 0; l < __KP_SIMD_WIDTH; ++l) {
    if (!r.active(l)) continue;
    unsigned other = r.at<M>(l).*field;
    if (other != mine) return report_nonuniform(fn, what, my_lane(), mine, l, other, s);
  }
}

template <class T>
struct lane_msg {
  T value;
  unsigned arg;
};
template <class T>
struct fill_msg {
  T value, fill;
  unsigned delta, modulo;
};

// The shuffle family, one row each: name, the argument Metal requires to be uniform (or null),
// and how the source lane follows from the caller's lane `me` and the argument `a`.
enum shuffle_kind {
  simd_lane, simd_xor, simd_up, simd_down, simd_rot_up, simd_rot_down, simd_bcast, simd_first,
  quad_lane, quad_xor, quad_up, quad_down, quad_rot_up, quad_rot_down, quad_bcast, quad_first,
};
struct shuffle_row {
  const char* name;
  const char* uniform;
};
inline constexpr shuffle_row shuffle_rows[] = {
    {"simd_shuffle", nullptr},           {"simd_shuffle_xor", "mask"},
    {"simd_shuffle_up", "delta"},        {"simd_shuffle_down", "delta"},
    {"simd_shuffle_rotate_up", "delta"}, {"simd_shuffle_rotate_down", "delta"},
    {"simd_broadcast", "broadcast lane"}, {"simd_broadcast_first", nullptr},
    {"quad_shuffle", nullptr},           {"quad_shuffle_xor", "mask"},
    {"quad_shuffle_up", "delta"},        {"quad_shuffle_down", "delta"},
    {"quad_shuffle_rotate_up", "delta"}, {"quad_shuffle_rotate_down", "delta"},
    {"quad_broadcast", nullptr},         {"quad_first", nullptr},
};
// Where the caller's value comes from: a lane, its own value (kKeep), or nowhere because the
// lane argument itself is out of range (kBadArg).
inline constexpr int kKeep = -1000;
inline constexpr int kBadArg = -2000;
__KP_INLINE int shuffle_source(shuffle_kind k, int me, int a, const simd_round& r) {
  const int W = __KP_SIMD_WIDTH, q = me & 3, base = me & ~3;
  switch (k) {
    case simd_lane: return a;
    case simd_xor: return me ^ a;
    // Out of the SIMD-group: the caller keeps its own value (no wrap), per the MSL spec.
    case simd_up: return me - a < 0 ? kKeep : me - a;
    case simd_down: return me + a >= W ? kKeep : me + a;
    // unconfirmed: rotation wraps at 32 lanes even in a partial SIMD-group (reads of missing
    // lanes are then reported).
    case simd_rot_up: return (me - a % W + W) % W;
    case simd_rot_down: return (me + a) % W;
    case simd_bcast: return a;
    case simd_first: return r.first();
    case quad_lane: return a < 4 ? base + a : kBadArg;
    case quad_xor: return a < 4 ? base + (q ^ a) : kBadArg;
    case quad_up: return q - a < 0 ? kKeep : me - a;
    case quad_down: return q + a >= 4 ? kKeep : me + a;
    case quad_rot_up: return base + (q - a % 4 + 4) % 4;
    case quad_rot_down: return base + (q + a) % 4;
    case quad_bcast: return a < 4 ? base + a : kBadArg;
    case quad_first: return base + __builtin_ctzll((r.mask >> base) & 0xF);
  }
  return kBadArg;
}

template <class T>
__KP_COLLECTIVE T shuffle(shuffle_kind k, T x, unsigned arg, site s) {
  const shuffle_row& row = shuffle_rows[k];
  lane_msg<T> mine{x, arg};
  simd_round r = rendezvous(mine, s);
  if (row.uniform) check_uniform<lane_msg<T>>(row.name, row.uniform, r, &lane_msg<T>::arg, s);
  int src = shuffle_source(k, my_lane(), int(arg), r);
  if (src == kKeep) return x;
  if (src == kBadArg) {
    report_bad_arg(row.name, "lane argument", long(arg), s);
    return poison<T>();
  }
  if (!r.active(src)) {
    report_bad_source(row.name, src, s);
    return poison<T>();
  }
  return r.at<lane_msg<T>>(src).value;
}

// Shift-and-fill within segments of `modulo` lanes (modulo up to 32 for simd_, 4 for quad_).
// Up: the lowest `delta` lanes of each segment take `filling` from the segment's top lanes;
// down: the highest `delta` take it from the segment's bottom lanes.
template <class T>
__KP_COLLECTIVE T shuffle_fill(const char* fn, bool up, T data, T filling, unsigned delta,
                          unsigned modulo, unsigned width, site s) {
  fill_msg<T> mine{data, filling, delta, modulo};
  simd_round r = rendezvous(mine, s);
  check_uniform<fill_msg<T>>(fn, "delta", r, &fill_msg<T>::delta, s);
  check_uniform<fill_msg<T>>(fn, "modulo", r, &fill_msg<T>::modulo, s);
  if (modulo < 2 || modulo > width || (modulo & (modulo - 1))) {
    report_bad_arg(fn, "modulo (must be 2, 4, 8, 16 or 32, at most the group width)", modulo, s);
    return poison<T>();
  }
  if (delta > modulo) {
    report_bad_arg(fn, "delta (must not exceed modulo)", delta, s);
    return poison<T>();
  }
  int me = my_lane(), base = me & ~int(modulo - 1), p = me - base, d = int(delta);
  bool from_fill = up ? p < d : p + d >= int(modulo);
  int src = up ? (from_fill ? base + int(modulo) - d + p : me - d)
               : (from_fill ? base + p + d - int(modulo) : me + d);
  if (!r.active(src)) {
    report_bad_source(fn, src, s);
    return poison<T>();
  }
  fill_msg<T> m = r.at<fill_msg<T>>(src);
  return from_fill ? m.fill : m.value;
}

// The lanes a reduction or scan ranges over: the whole SIMD-group, or the caller's quad.
struct group_span {
  int base, width;
};
__KP_INLINE group_span simd_span() { return {0, __KP_SIMD_WIDTH}; }
__KP_INLINE group_span quad_span() { return {my_lane() & ~3, 4}; }

// bfloat lanes are reduced in float (as MLX's prelude does); others in their own type, so a
// half simd_sum accumulates in half.
template <class T>
using reduce_t = conditional_t<is_same_v<elem_t<T>, bfloat>,
                               conditional_t<vinfo<T>::is_vector, metal::vec<float, lanes_v<T>>,
                                             float>,
                               T>;

// Integer lanes wrap (computed unsigned) instead of overflowing.
template <class T, class F>
__KP_INLINE T lanewise(T a, T b, F f) {
  if constexpr (vinfo<T>::is_vector) {
    for (int i = 0; i < lanes_v<T>; ++i) a[i] = f(elem_t<T>(a[i]), elem_t<T>(b[i]));
    return a;
  } else {
    return f(a, b);
  }
}
struct op_sum {
  template <class E>
  __KP_INLINE E operator()(E a, E b) const {
    if constexpr (int_scalar<E>) return E(bits_t<E>(a) + bits_t<E>(b));
    else return a + b;
  }
};
struct op_product {
  template <class E>
  __KP_INLINE E operator()(E a, E b) const {
    if constexpr (int_scalar<E>) return E(bits_t<E>(a) * bits_t<E>(b));
    else return a * b;
  }
};
struct op_min {
  template <class E>
  __KP_INLINE E operator()(E a, E b) const { return min1(a, b); }
};
struct op_max {
  template <class E>
  __KP_INLINE E operator()(E a, E b) const { return max1(a, b); }
};
struct op_and {
  template <class E>
  __KP_INLINE E operator()(E a, E b) const { return E(a & b); }
};
struct op_or {
  template <class E>
  __KP_INLINE E operator()(E a, E b) const { return E(a | b); }
};
struct op_xor {
  template <class E>
  __KP_INLINE E operator()(E a, E b) const { return E(a ^ b); }
};

// Reduce the active lanes of the span, pairwise in lane order (a tree, as hardware does).
template <class T, class Op>
__KP_COLLECTIVE T reduce(T x, site s, group_span g, Op op) {
  using R = reduce_t<T>;
  simd_round r = rendezvous(x, s);
  R vals[__KP_SIMD_WIDTH];
  int n = 0;
  for (int l = g.base; l < g.base + g.width; ++l)
    if (r.active(l)) vals[n++] = convert<R>(r.at<T>(l));
  for (int stride = 1; stride < n; stride *= 2)
    for (int i = 0; i + stride < n; i += 2 * stride) vals[i] = lanewise(vals[i], vals[i + stride], op);
  return convert<T>(vals[0]);
}

// Scan over the active lanes of the span up to the caller, in lane order.
template <class T, class Op>
__KP_COLLECTIVE T scan(T x, site s, group_span g, Op op, bool inclusive, elem_t<T> identity) {
  using R = reduce_t<T>;
  simd_round r = rendezvous(x, s);
  R acc = R(identity);
  for (int l = g.base; l < my_lane(); ++l)
    if (r.active(l)) acc = lanewise(acc, convert<R>(r.at<T>(l)), op);
  if (inclusive) acc = lanewise(acc, convert<R>(x), op);
  return convert<T>(acc);
}

}  // namespace __kp

#include "simd_api.h"

// Metal atomics (<metal_atomic>): atomic<T> is exactly T's storage, so a `device atomic<float>*`
// aliases a float buffer. Real __atomic operations: threadgroups run on concurrent OS threads.
#pragma once
#pragma clang system_header
#include "simd.h"

namespace metal {

enum memory_order {
  memory_order_relaxed,
  memory_order_acquire,
  memory_order_release,
  memory_order_acq_rel,
  memory_order_seq_cst,
};
enum thread_scope {
  thread_scope_thread,
  thread_scope_simdgroup,
  thread_scope_threadgroup,
  thread_scope_device,
};

template <class T>
struct atomic {
  static_assert(__kp::is_same_v<T, int> || __kp::is_same_v<T, uint> || __kp::is_same_v<T, float> ||
                    __kp::is_same_v<T, bool> || __kp::is_same_v<T, ulong>,
                "Metal atomics exist for int, uint, float, bool and (Apple9) ulong only");
  T __kp_value;
  atomic() = default;
  atomic(const atomic&) = delete;
  atomic& operator=(const atomic&) = delete;
};
using atomic_int = atomic<int>;
using atomic_uint = atomic<uint>;
using atomic_float = atomic<float>;
using atomic_bool = atomic<bool>;
using atomic_ulong = atomic<ulong>;

}  // namespace metal

namespace __kp {

__KP_INLINE constexpr int order(metal::memory_order mo) {
  switch (mo) {
    case metal::memory_order_relaxed: return __ATOMIC_RELAXED;
    case metal::memory_order_acquire: return __ATOMIC_ACQUIRE;
    case metal::memory_order_release: return __ATOMIC_RELEASE;
    case metal::memory_order_acq_rel: return __ATOMIC_ACQ_REL;
    default: return __ATOMIC_SEQ_CST;
  }
}
// An atomic's storage; the cast drops volatile (Metal's signatures take volatile pointers).
// The atomic functions take `A*` for A = atomic<T> in any address space (MSL allows device
// and threadgroup atomics; metal_sim's address-space check gives the pointers clang address
// spaces): T is the declared type of the value, whatever the object's space.
template <class A>
using atomic_value_t = decltype(static_cast<A*>(nullptr)->__kp_value);
template <class A, class T = atomic_value_t<A>>
__KP_INLINE T* storage(const volatile A* obj) {
  return (T*)&obj->__kp_value;  // a C-style cast may drop the address space
}
__KP_INLINE void check(const void* p, size_t n, int is_write, site s) {
#ifdef __KP_INSTRUMENTED
  __kp_check_access(p, n, is_write, s.line);
#else
  (void)p, (void)n, (void)is_write, (void)s;
#endif
}

// Which element types Metal gives each fetch operation.
template <class T>
inline constexpr bool int_or_uint = is_same_v<T, int> || is_same_v<T, uint>;
template <class T>
inline constexpr bool arith_atomic = int_or_uint<T> || is_same_v<T, float>;
template <class T>
inline constexpr bool minmax_atomic = int_or_uint<T> || is_same_v<T, ulong>;

// Read-modify-write by CAS (float add/sub, and everything via one path for readability).
template <class A, class F, class T = atomic_value_t<A>>
__KP_NOSAN __KP_INLINE T rmw(const volatile A* obj, metal::memory_order mo, site s, F f) {
  T* p = storage(obj);
  check(p, sizeof(T), 1, s);
  T old;
  __atomic_load(p, &old, __ATOMIC_RELAXED);
  T next = f(old);
  while (!__atomic_compare_exchange(p, &old, &next, true, order(mo), __ATOMIC_RELAXED))
    next = f(old);
  return old;
}

}  // namespace __kp

namespace metal {

template <class A, class T = __kp::atomic_value_t<A>>
__KP_NOSAN __KP_INLINE T atomic_load_explicit(const volatile A* obj, memory_order mo,
                                          __kp::site s = __KP_HERE) {
  T* p = __kp::storage(obj);
  __kp::check(p, sizeof(T), 0, s);
  T v;
  __atomic_load(p, &v, __kp::order(mo));
  return v;
}
template <class A, class T = __kp::atomic_value_t<A>>
__KP_NOSAN __KP_INLINE void atomic_store_explicit(volatile A* obj, __kp::nodeduce_t<T> desired,
                                              memory_order mo, __kp::site s = __KP_HERE) {
  T* p = __kp::storage(obj);
  __kp::check(p, sizeof(T), 1, s);
  __atomic_store(p, &desired, __kp::order(mo));
}
template <class A, class T = __kp::atomic_value_t<A>>
__KP_NOSAN __KP_INLINE T atomic_exchange_explicit(volatile A* obj, __kp::nodeduce_t<T> desired,
                                              memory_order mo, __kp::site s = __KP_HERE) {
  static_assert(!__kp::is_same_v<T, ulong>, "atomic_ulong supports only load/store/min/max");
  T* p = __kp::storage(obj);
  __kp::check(p, sizeof(T), 1, s);
  T old;
  __atomic_exchange(p, &desired, &old, __kp::order(mo));
  return old;
}

// Float compares by value, not bits: -0 matches +0, and a NaN never matches, so a CAS loop over
// memory that holds NaN spins (MLX's atomic.h breaks out of it). unconfirmed: Apple's exact
// compare, inferred from MLX's workaround comment.
template <class A, class T = __kp::atomic_value_t<A>>
__KP_NOSAN __KP_INLINE bool atomic_compare_exchange_weak_explicit(
    volatile A* obj, __kp::nodeduce_t<T>* expected, __kp::nodeduce_t<T> desired,
    memory_order success, memory_order failure, __kp::site s = __KP_HERE) {
  static_assert(!__kp::is_same_v<T, ulong>, "atomic_ulong supports only load/store/min/max");
  T* p = __kp::storage(obj);
  __kp::check(p, sizeof(T), 1, s);
  if constexpr (__kp::is_same_v<T, float>) {
    T cur;
    __atomic_load(p, &cur, __kp::order(failure));
    if (!(cur == *expected)) {
      *expected = cur;
      return false;
    }
    if (__atomic_compare_exchange(p, &cur, &desired, true, __kp::order(success), __ATOMIC_RELAXED))
      return true;
    *expected = cur;
    return false;
  } else {
    return __atomic_compare_exchange(p, expected, &desired, true, __kp::order(success),
                                     __ATOMIC_RELAXED);
  }
}

// Integer add/sub wrap (computed unsigned); float add/sub is a CAS loop.
#define __KP_ATOMIC_FETCH(name, allowed, msg, ...)                                         \
  template <class A, class T = __kp::atomic_value_t<A>>                                  \
  __KP_NOSAN __KP_INLINE T name(volatile A* obj, __kp::nodeduce_t<T> operand,                \
                            memory_order mo, __kp::site s = __KP_HERE) {                     \
    static_assert(__kp::allowed<T>, #name ": " msg);                                           \
    return __kp::rmw(obj, mo, s, [operand](T old) { return T(__VA_ARGS__); });             \
  }
__KP_ATOMIC_FETCH(atomic_fetch_add_explicit, arith_atomic, "Metal has it for int, uint, float",
                __kp::is_same_v<T, float> ? old + operand : T(uint(old) + uint(operand)))
__KP_ATOMIC_FETCH(atomic_fetch_sub_explicit, arith_atomic, "Metal has it for int, uint, float",
                __kp::is_same_v<T, float> ? old - operand : T(uint(old) - uint(operand)))
__KP_ATOMIC_FETCH(atomic_fetch_and_explicit, int_or_uint, "Metal has it for int and uint",
                old & operand)
__KP_ATOMIC_FETCH(atomic_fetch_or_explicit, int_or_uint, "Metal has it for int and uint",
                old | operand)
__KP_ATOMIC_FETCH(atomic_fetch_xor_explicit, int_or_uint, "Metal has it for int and uint",
                old ^ operand)
__KP_ATOMIC_FETCH(atomic_fetch_min_explicit, minmax_atomic,
                "Metal has it for int, uint and (Apple9) ulong; float min needs a CAS loop",
                operand < old ? operand : old)
__KP_ATOMIC_FETCH(atomic_fetch_max_explicit, minmax_atomic,
                "Metal has it for int, uint and (Apple9) ulong; float max needs a CAS loop",
                operand > old ? operand : old)
#undef __KP_ATOMIC_FETCH

__KP_INLINE void atomic_thread_fence(mem_flags, memory_order mo,
                                   thread_scope = thread_scope_device) {
  __atomic_thread_fence(__kp::order(mo));
}

}  // namespace metal

// metal_sim's address-space check (runners/metal_sim/spaces.py): included only by the check
// unit, a copy of the kernel that clang type-checks and never compiles to code. MSL's address
// spaces become clang's, so the type system refuses what Apple's compiler refuses: implicit
// conversions between spaces, static_cast/reinterpret_cast across them, writes to `constant`.
// Locals live in `thread`, the default space (clang allows no address space on a local).
// Codegen keeps the words erased: TSan-style checks ignore accesses outside address space 0.
#pragma once
#pragma clang system_header

namespace __kp {
template <class P> struct cv_pointee;
template <class T> struct cv_pointee<T*> { using type = const volatile T*; };
template <class To, class From>
concept same_space = __is_same(From, decltype(nullptr)) ||
                     requires(From f) { reinterpret_cast<typename cv_pointee<To>::type>(f); };
}  // namespace __kp

// What a C-style cast to a pointer type becomes in the check unit: the cast, unless it would
// change the address space (clang's C-style cast allows that; MSL's does not).
template <class To, class From>
  requires __kp::same_space<To, From>
inline To __kp_ascast(From f) { return (To)f; }

#define device __attribute__((address_space(1)))
#define constant __attribute__((address_space(2)))
#define threadgroup __attribute__((address_space(3)))
#define threadgroup_imageblock __attribute__((address_space(4)))
#define thread

// kport's stand-in for PyTorch's c10::complex, a host library type that device code names
// (mamba-ssm's selective scan: `using complex_t = c10::complex<float>`). c10's layout (real_,
// then imag_, public) and the arithmetic those kernels use; nothing of torch else.
#pragma once

namespace c10 {
template <typename T>
struct complex {
  T real_;
  T imag_;
  __host__ __device__ constexpr complex(T re = T(), T im = T()) : real_(re), imag_(im) {}
  __host__ __device__ constexpr T real() const { return real_; }
  __host__ __device__ constexpr T imag() const { return imag_; }
};

template <typename T>
__host__ __device__ inline complex<T> operator+(complex<T> a, complex<T> b) {
  return complex<T>(a.real_ + b.real_, a.imag_ + b.imag_);
}

template <typename T>
__host__ __device__ inline complex<T> operator*(complex<T> a, complex<T> b) {
  return complex<T>(a.real_ * b.real_ - a.imag_ * b.imag_, a.real_ * b.imag_ + a.imag_ * b.real_);
}

template <typename T>
__host__ __device__ inline complex<T> operator*(complex<T> a, T b) {
  return complex<T>(a.real_ * b, a.imag_ * b);
}

template <typename T>
__host__ __device__ inline complex<T> operator*(T a, complex<T> b) {
  return complex<T>(a * b.real_, a * b.imag_);
}
}  // namespace c10

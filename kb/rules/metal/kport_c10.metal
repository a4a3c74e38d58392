// kport_c10: PyTorch's c10::complex<T> in MSL (kport's own, written from c10's documented layout:
// real_ then imag_, public, aligned to two T), with the arithmetic CUDA kernels use on it; the
// same surface as cuda_sim's stand-in (runners/simcore/include/kport/cuda/sysinclude/c10/util/
// complex.h), so a port compiles what the oracle compiled. The translator maps `c10::complex`
// onto `kport_c10::complex` where the source does not define c10 itself (a host library's
// header kport reads as empty). Conservative MSL 3.1: templates, no std.
namespace kport_c10 {

template <typename T>
struct alignas(2 * sizeof(T)) complex {
  T real_;
  T imag_;
  constexpr complex(T re = T(), T im = T()) : real_(re), imag_(im) {}
  constexpr T real() const { return real_; }
  constexpr T imag() const { return imag_; }
};

template <typename T>
inline complex<T> operator+(complex<T> a, complex<T> b) {
  return complex<T>(a.real_ + b.real_, a.imag_ + b.imag_);
}

template <typename T>
inline complex<T> operator*(complex<T> a, complex<T> b) {
  return complex<T>(a.real_ * b.real_ - a.imag_ * b.imag_, a.real_ * b.imag_ + a.imag_ * b.real_);
}

template <typename T>
inline complex<T> operator*(complex<T> a, T b) {
  return complex<T>(a.real_ * b, a.imag_ * b);
}

template <typename T>
inline complex<T> operator*(T a, complex<T> b) {
  return complex<T>(a * b.real_, a * b.imag_);
}

}  // namespace kport_c10

// Metal matrices: floatCxR / halfCxR / bfloatCxR have C columns of R rows, column-major;
// m[i] is column i and m[i][j] row j of it. float3x3 columns are float3 (16 bytes each).
#pragma once
#pragma clang system_header
#include "convert.h"

namespace __kp {

// Not constexpr: clang 22 crashes constant-evaluating stores to ext-vector lanes (m[c][r] = x).
template <class T, int C, int R>
struct matrix {
  using column_type = metal::vec<T, R>;
  column_type columns[C];

  matrix() = default;
  // A scalar puts d on the diagonal, zeros elsewhere (Metal: float4x4(1.0f) is the identity).
  explicit matrix(T d) {
    for (int c = 0; c < C; ++c) {
      columns[c] = column_type(T(0));
      if (c < R) columns[c][c] = d;
    }
  }
  // From C column vectors of R lanes each.
  template <class... V>
    requires(sizeof...(V) == C && C > 1 && ((lanes_v<V> == R && vinfo<V>::is_vector) && ...))
  matrix(const V&... cols) : columns{convert<column_type>(unpack(cols))...} {}
  // From C*R scalars, column by column.
  template <class... S>
    requires(sizeof...(S) == C * R && (arith_scalar<S> && ...))
  matrix(S... s) {
    T flat[C * R] = {cvt<T>(s)...};
    for (int c = 0; c < C; ++c)
      for (int r = 0; r < R; ++r) columns[c][r] = flat[c * R + r];
  }
  // Element type conversion: float4x4(half4x4_value).
  template <class U>
    requires(!is_same_v<U, T>)
  explicit matrix(const matrix<U, C, R>& o) {
    for (int c = 0; c < C; ++c) columns[c] = convert<column_type>(o.columns[c]);
  }

  column_type& operator[](int c) { return columns[c]; }
  const column_type& operator[](int c) const { return columns[c]; }

  matrix& operator+=(const matrix& o) { return *this = *this + o; }
  matrix& operator-=(const matrix& o) { return *this = *this - o; }
  matrix& operator*=(T s) { return *this = *this * s; }
  template <int K>
    requires(K == C && C == R)
  matrix& operator*=(const matrix<T, K, C>& o) { return *this = *this * o; }

  friend matrix operator+(matrix a, const matrix& b) {
    for (int c = 0; c < C; ++c) a.columns[c] += b.columns[c];
    return a;
  }
  friend matrix operator-(matrix a, const matrix& b) {
    for (int c = 0; c < C; ++c) a.columns[c] -= b.columns[c];
    return a;
  }
  friend matrix operator-(matrix a) {
    for (int c = 0; c < C; ++c) a.columns[c] = -a.columns[c];
    return a;
  }
  friend matrix operator*(matrix a, T s) {
    for (int c = 0; c < C; ++c) a.columns[c] *= s;
    return a;
  }
  friend matrix operator*(T s, matrix a) { return a * s; }
  friend bool operator==(const matrix& a, const matrix& b) {
    for (int c = 0; c < C; ++c)
      for (int r = 0; r < R; ++r)
        if (a.columns[c][r] != b.columns[c][r]) return false;
    return true;
  }
  // matrix * column vector: sum over columns of column * v[c].
  friend metal::vec<T, R> operator*(const matrix& m, metal::vec<T, C> v) {
    metal::vec<T, R> acc = m.columns[0] * v[0];
    for (int c = 1; c < C; ++c) acc += m.columns[c] * v[c];
    return acc;
  }
  // row vector * matrix: one dot product per column.
  friend metal::vec<T, C> operator*(metal::vec<T, R> v, const matrix& m) {
    metal::vec<T, C> out;
    for (int c = 0; c < C; ++c) {
      T s = v[0] * m.columns[c][0];
      for (int r = 1; r < R; ++r) s += v[r] * m.columns[c][r];
      out[c] = s;
    }
    return out;
  }
};

// (C columns x R rows) * (K columns x C rows) = K columns x R rows.
template <class T, int C, int R, int K>
matrix<T, K, R> operator*(const matrix<T, C, R>& a, const matrix<T, K, C>& b) {
  matrix<T, K, R> out;
  for (int k = 0; k < K; ++k) out.columns[k] = a * b.columns[k];
  return out;
}

template <class T, int C, int R>
inline constexpr bool is_matrix_v<matrix<T, C, R>> = true;

}  // namespace __kp

namespace metal {

// Metal's matrix<T, Cols, Rows> (ggml: typedef matrix<bfloat, 4, 4> bfloat4x4).
template <class T, int C, int R>
using matrix = __kp::matrix<T, C, R>;

template <class T, int C, int R>
__kp::matrix<T, R, C> transpose(const __kp::matrix<T, C, R>& m) {
  __kp::matrix<T, R, C> t;
  for (int c = 0; c < C; ++c)
    for (int r = 0; r < R; ++r) t.columns[r][c] = m.columns[c][r];
  return t;
}

template <class T>
T determinant(const __kp::matrix<T, 2, 2>& m) {
  return m[0][0] * m[1][1] - m[1][0] * m[0][1];
}
template <class T>
T determinant(const __kp::matrix<T, 3, 3>& m) {
  return m[0][0] * (m[1][1] * m[2][2] - m[2][1] * m[1][2]) -
         m[1][0] * (m[0][1] * m[2][2] - m[2][1] * m[0][2]) +
         m[2][0] * (m[0][1] * m[1][2] - m[1][1] * m[0][2]);
}
template <class T>
T determinant(const __kp::matrix<T, 4, 4>& m) {
  T det = T(0);
  for (int c = 0; c < 4; ++c) {  // Laplace expansion along row 0
    __kp::matrix<T, 3, 3> minor;
    for (int k = 0, mc = 0; k < 4; ++k) {
      if (k == c) continue;
      minor.columns[mc++] = m.columns[k].yzw;
    }
    T term = m[c][0] * determinant(minor);
    det += (c & 1) ? -term : term;
  }
  return det;
}

}  // namespace metal

#define __KP_MATRIX_TYPEDEFS(T)                         \
  typedef __kp::matrix<T, 2, 2> T##2x2;                 \
  typedef __kp::matrix<T, 2, 3> T##2x3;                 \
  typedef __kp::matrix<T, 2, 4> T##2x4;                 \
  typedef __kp::matrix<T, 3, 2> T##3x2;                 \
  typedef __kp::matrix<T, 3, 3> T##3x3;                 \
  typedef __kp::matrix<T, 3, 4> T##3x4;                 \
  typedef __kp::matrix<T, 4, 2> T##4x2;                 \
  typedef __kp::matrix<T, 4, 3> T##4x3;                 \
  typedef __kp::matrix<T, 4, 4> T##4x4;
__KP_MATRIX_TYPEDEFS(float)
__KP_MATRIX_TYPEDEFS(half)
__KP_MATRIX_TYPEDEFS(bfloat)
#undef __KP_MATRIX_TYPEDEFS

static_assert(sizeof(float4x4) == 64 && sizeof(float3x3) == 48 && sizeof(half2x4) == 16);

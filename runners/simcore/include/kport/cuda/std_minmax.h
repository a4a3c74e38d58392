// The few host-library names CUDA device code uses in constant expressions (nvcc sees the host
// compiler's headers; real kernels' traits do `std::max({sizeof(A), sizeof(B)})`):
// std::initializer_list and std::min/std::max, from the compiler's own library. libc++'s
// per-algorithm headers keep a kernel's compile fast; other libraries get <algorithm>.
#pragma once
#include <initializer_list>
#if __has_include(<__algorithm/max.h>) && __has_include(<__algorithm/min.h>)
#include <__algorithm/max.h>
#include <__algorithm/min.h>
#else
#include <algorithm>
#endif

// operator new and delete for kernels: a kernel library is linked without libraries and binds
// them to the host's (device-side `new`, as CUDA allows), which no longer links libc++. The
// host itself allocates with malloc (mini.h). Out of memory aborts, as an uncaught bad_alloc.
#include <stddef.h>
#include <stdlib.h>

namespace std {
enum class align_val_t : size_t {};  // as <new> declares it (no C++ headers here)
}  // namespace std

static void* allocate(size_t size) {
  void* p = malloc(size ? size : 1);
  if (!p) abort();
  return p;
}

static void* allocate(size_t size, std::align_val_t align) {
  size_t a = (size_t)align < sizeof(void*) ? sizeof(void*) : (size_t)align;
  void* p = nullptr;
  if (posix_memalign(&p, a, size ? size : 1) != 0) abort();
  return p;
}

void* operator new(size_t size) { return allocate(size); }
void* operator new[](size_t size) { return allocate(size); }
void* operator new(size_t size, std::align_val_t align) { return allocate(size, align); }
void* operator new[](size_t size, std::align_val_t align) { return allocate(size, align); }
void operator delete(void* p) noexcept { free(p); }
void operator delete[](void* p) noexcept { free(p); }
void operator delete(void* p, size_t) noexcept { free(p); }
void operator delete[](void* p, size_t) noexcept { free(p); }
void operator delete(void* p, std::align_val_t) noexcept { free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { free(p); }
void operator delete(void* p, size_t, std::align_val_t) noexcept { free(p); }
void operator delete[](void* p, size_t, std::align_val_t) noexcept { free(p); }

// Growable arrays and text for the simulator host, on malloc/realloc alone. The host links no
// C++ standard library (-nostdlib++, simbuild.py): building zig's libc++ would cost every fresh
// install a minute. Memory is never freed; the host lives for one launch.
#pragma once
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

namespace __kp {

// An array of plain values (moved bytewise by realloc); all zero bytes is the empty array.
template <class T>
struct Array {
  static_assert(__is_trivially_copyable(T), "Array holds plain values only");
  T* items = nullptr;
  size_t count = 0, capacity = 0;

  size_t size() const { return count; }
  bool empty() const { return count == 0; }
  T* data() { return items; }
  const T* data() const { return items; }
  T& operator[](size_t i) { return items[i]; }
  const T& operator[](size_t i) const { return items[i]; }
  T* begin() { return items; }
  T* end() { return items + count; }
  const T* begin() const { return items; }
  const T* end() const { return items + count; }

  // New elements are zero bytes.
  void resize(size_t n) {
    if (n > capacity) grow(n);
    if (n > count) memset((void*)(items + count), 0, (n - count) * sizeof(T));
    count = n;
  }
  void push(const T& value) {
    if (count == capacity) grow(count + 1);
    items[count++] = value;
  }

 private:
  // Room for at least n, doubling so that appending one at a time stays linear.
  void grow(size_t n) {
    size_t want = n > 2 * capacity ? n : 2 * capacity;
    if (want < 8) want = 8;
    T* grown = (T*)realloc((void*)items, want * sizeof(T));
    if (!grown) abort();  // out of memory ends the launch, as a failed operator new did
    items = grown, capacity = want;
  }
};

// A growable string, always terminated by a NUL that size() does not count.
struct Text {
  Array<char> chars;

  size_t size() const { return chars.empty() ? 0 : chars.size() - 1; }
  const char* c_str() const { return chars.empty() ? "" : chars.data(); }
  void add(const char* s, size_t n) {
    size_t at = size();
    chars.resize(at + n + 1);
    memcpy(chars.data() + at, s, n);
    chars[at + n] = 0;
  }
  void add(const char* s) { add(s, strlen(s)); }
  void add(char c) { add(&c, 1); }
};

}  // namespace __kp

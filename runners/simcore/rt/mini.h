// The little of a C++ library the simulator host uses, on the C library alone: a growable
// array, a string, a hash map, a sort and a mutex. Why: built without libc++ (-nostdlib++,
// simbuild.py), the host's first link no longer makes zig build libc++ from source (a minute).
// No exceptions: running out of memory aborts, which the host reports as a crash.
#pragma once
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

namespace __kp {
struct Place {};  // tags our placement new: <new> is not there, and its own may not be redefined
}  // namespace __kp

inline void* operator new(size_t, void* at, __kp::Place) noexcept { return at; }
inline void operator delete(void*, void*, __kp::Place) noexcept {}

namespace __kp {

template <class T> struct Unref { using type = T; };
template <class T> struct Unref<T&> { using type = T; };

template <class T>
constexpr typename Unref<T>::type&& move(T&& v) {
  return static_cast<typename Unref<T>::type&&>(v);
}

template <class T>
constexpr const T& max(const T& a, const T& b) { return a < b ? b : a; }

[[noreturn]] inline void out_of_memory() { abort(); }

inline void* allocate(size_t bytes) {
  void* p = malloc(bytes ? bytes : 1);
  if (!p) out_of_memory();
  return p;
}

// `new T()` and `delete p`, without the C++ library's operator new.
template <class T>
T* create() { return new (allocate(sizeof(T)), Place{}) T(); }

template <class T>
void destroy(T* p) {
  p->~T();
  free(p);
}

// A growable array, as std::vector: elements contiguous, data() stable until it grows.
template <class T>
class Vec {
  static_assert(alignof(T) <= 16, "malloc aligns to 16 bytes");

 public:
  Vec() = default;
  Vec(const Vec& o) { append(o.data_, o.size_); }
  Vec(Vec&& o) noexcept : data_(o.data_), size_(o.size_), cap_(o.cap_) {
    o.data_ = nullptr, o.size_ = o.cap_ = 0;
  }
  Vec& operator=(Vec o) noexcept {  // o is a copy, or what was moved: swap it in
    T* d = data_;
    size_t s = size_, c = cap_;
    data_ = o.data_, size_ = o.size_, cap_ = o.cap_;
    o.data_ = d, o.size_ = s, o.cap_ = c;
    return *this;
  }
  ~Vec() {
    clear();
    free(data_);
  }

  T* data() { return data_; }
  const T* data() const { return data_; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  T& operator[](size_t i) { return data_[i]; }
  const T& operator[](size_t i) const { return data_[i]; }
  T* begin() { return data_; }
  T* end() { return data_ + size_; }
  const T* begin() const { return data_; }
  const T* end() const { return data_ + size_; }
  T& back() { return data_[size_ - 1]; }

  void push_back(T v) {  // by value: v may be one of our own elements
    if (size_ == cap_) reserve(cap_ ? 2 * cap_ : 4);
    new (data_ + size_, Place{}) T(move(v));
    size_++;
  }
  void append(const T* items, size_t n) {
    reserve(size_ + n);
    for (size_t i = 0; i < n; i++) new (data_ + size_ + i, Place{}) T(items[i]);
    size_ += n;
  }
  void pop_back() { data_[--size_].~T(); }
  // New elements are value-initialised (numbers are 0), as std::vector's.
  void resize(size_t n) {
    while (size_ > n) pop_back();
    reserve(n);
    for (; size_ < n; size_++) new (data_ + size_, Place{}) T();
  }
  void assign(size_t n, const T& v) {
    clear();
    reserve(n);
    for (; size_ < n; size_++) new (data_ + size_, Place{}) T(v);
  }
  void clear() {
    while (size_) pop_back();
  }
  void reserve(size_t n) {
    if (n <= cap_) return;
    if (n < 2 * cap_) n = 2 * cap_;
    T* grown = (T*)allocate(n * sizeof(T));
    for (size_t i = 0; i < size_; i++) {
      new (grown + i, Place{}) T(move(data_[i]));
      data_[i].~T();
    }
    free(data_);
    data_ = grown, cap_ = n;
  }

 private:
  T* data_ = nullptr;
  size_t size_ = 0, cap_ = 0;
};

// A string of bytes, NUL-terminated for the C library (c_str()).
class Str {
 public:
  Str() = default;
  Str(const char* s) { append(s, strlen(s)); }  // implicit, as std::string's

  const char* c_str() const { return chars_.empty() ? "" : chars_.data(); }
  const char* data() const { return c_str(); }
  size_t size() const { return chars_.empty() ? 0 : chars_.size() - 1; }
  bool empty() const { return size() == 0; }
  const char* begin() const { return c_str(); }
  const char* end() const { return c_str() + size(); }

  void append(const char* s, size_t n) {
    if (!chars_.empty()) chars_.pop_back();  // the NUL
    chars_.append(s, n);
    chars_.push_back('\0');
  }
  Str& operator+=(const Str& s) {
    append(s.data(), s.size());
    return *this;
  }
  Str& operator+=(const char* s) {
    append(s, strlen(s));
    return *this;
  }
  Str& operator+=(char c) {
    append(&c, 1);
    return *this;
  }
  friend Str operator+(Str a, const Str& b) {
    a += b;
    return a;
  }
  bool operator==(const char* s) const { return strcmp(c_str(), s) == 0; }
  friend bool operator==(const Str& a, const Str& b) {
    return a.size() == b.size() && memcmp(a.data(), b.data(), a.size()) == 0;
  }

 private:
  Vec<char> chars_;  // the bytes and a NUL, or nothing
};

// Hashes an integer key; HashMap takes the high bits of its product with 2^64 / phi.
struct IntHash {
  uint64_t operator()(uint64_t k) const { return k; }
};

// A hash map with open addressing (linear probing) and no removal but clear(), which keeps
// the capacity. K and V must be default-constructible; iteration order is the slots'.
template <class K, class V, class Hash = IntHash>
class HashMap {
 public:
  struct Entry {
    K key;
    V value;
  };

  V& operator[](const K& key) {
    if (4 * (count_ + 1) > 3 * slots_.size()) grow();
    size_t i = find(key);
    if (!used_[i]) used_[i] = 1, slots_[i].key = key, count_++;
    return slots_[i].value;
  }
  size_t size() const { return count_; }
  void clear() {
    for (size_t i = 0; i < slots_.size() && count_; i++)
      if (used_[i]) slots_[i] = Entry(), used_[i] = 0, count_--;
  }

  // Visits the entries in use (range-for, structured bindings: `auto& [key, value]`).
  class Iter {
   public:
    Iter(HashMap* m, size_t i) : m_(m), i_(i) { skip(); }
    Entry& operator*() const { return m_->slots_[i_]; }
    Iter& operator++() {
      i_++;
      skip();
      return *this;
    }
    bool operator!=(const Iter& o) const { return i_ != o.i_; }

   private:
    void skip() {
      while (i_ < m_->slots_.size() && !m_->used_[i_]) i_++;
    }
    HashMap* m_;
    size_t i_;
  };
  Iter begin() { return Iter(this, 0); }
  Iter end() { return Iter(this, slots_.size()); }

 private:
  size_t find(const K& key) const {
    const size_t mask = slots_.size() - 1;
    size_t i = (size_t)((Hash()(key) * 0x9E3779B97F4A7C15ull) >> shift_);
    while (used_[i] && !(slots_[i].key == key)) i = (i + 1) & mask;
    return i;
  }
  void grow() {
    Vec<Entry> old = move(slots_);
    Vec<uint8_t> old_used = move(used_);
    size_t capacity = old.empty() ? 16 : 2 * old.size();
    shift_ = 64 - __builtin_ctzll(capacity);
    slots_.resize(capacity);
    used_.resize(capacity);
    for (size_t i = 0; i < old.size(); i++) {
      if (!old_used[i]) continue;
      size_t j = find(old[i].key);
      used_[j] = 1;
      slots_[j] = move(old[i]);
    }
  }

  Vec<Entry> slots_;  // a power of two of them
  Vec<uint8_t> used_;
  size_t count_ = 0;
  unsigned shift_ = 64;
};

// Sorts [first, last) by `less`: quicksort on the median of three, insertion sort for short
// ranges, heapsort past a depth limit (no quadratic worst case).
template <class T, class Less>
void sort(T* first, T* last, Less less) {
  if (last - first < 2) return;
  auto swap = [](T& a, T& b) {
    T t = move(a);
    a = move(b);
    b = move(t);
  };
  auto sift = [&](T* heap, size_t at, size_t n) {
    for (size_t child; (child = 2 * at + 1) < n; at = child) {
      if (child + 1 < n && less(heap[child], heap[child + 1])) child++;
      if (!less(heap[at], heap[child])) return;
      swap(heap[at], heap[child]);
    }
  };
  for (int depth = 2 * (64 - __builtin_clzll((uint64_t)(last - first) | 1)); last - first > 16;
       depth--) {
    const size_t n = last - first;
    if (depth == 0) {  // heapsort what is left
      for (size_t i = n / 2; i-- > 0;) sift(first, i, n);
      for (size_t i = n - 1; i > 0; i--) swap(first[0], first[i]), sift(first, 0, i);
      return;
    }
    T* mid = first + n / 2;
    if (less(*mid, *first)) swap(*mid, *first);
    if (less(last[-1], *mid)) swap(last[-1], *mid);
    if (less(*mid, *first)) swap(*mid, *first);
    const T pivot = *mid;
    T* lo = first;
    T* hi = last - 1;
    for (;;) {  // Hoare partition: [first, hi] <= pivot <= (hi, last)
      while (less(*lo, pivot)) lo++;
      while (less(pivot, *hi)) hi--;
      if (lo >= hi) break;
      swap(*lo++, *hi--);
    }
    // recurse into the shorter side, loop on the longer: the stack stays O(log n)
    if (hi + 1 - first < last - (hi + 1)) {
      sort(first, hi + 1, less);
      first = hi + 1;
    } else {
      sort(hi + 1, last, less);
      last = hi + 1;
    }
  }
  for (T* i = first + 1; i < last; i++)  // insertion sort of the short range left
    for (T* j = i; j > first && less(*j, j[-1]); j--) swap(*j, j[-1]);
}

template <class T>
void sort(T* first, T* last) {
  sort(first, last, [](const T& a, const T& b) { return a < b; });
}

// Moves the first of each run of equal elements to the front; returns the end of those.
template <class T>
T* unique(T* first, T* last) {
  if (first == last) return last;
  T* out = first;
  for (T* p = first + 1; p < last; p++)
    if (!(*p == *out)) *++out = *p;
  return out + 1;
}

class Mutex {
 public:
  void lock() { pthread_mutex_lock(&m_); }
  void unlock() { pthread_mutex_unlock(&m_); }

 private:
  pthread_mutex_t m_ = PTHREAD_MUTEX_INITIALIZER;
};

// Holds a mutex for its scope.
class Lock {
 public:
  explicit Lock(Mutex& m) : m_(m) { m_.lock(); }
  ~Lock() { m_.unlock(); }
  Lock(const Lock&) = delete;
  Lock& operator=(const Lock&) = delete;

 private:
  Mutex& m_;
};

}  // namespace __kp

// attack: [[clang::no_sanitize("thread")]] on a helper that writes out of bounds
[[clang::no_sanitize("thread")]] inline void poke(device float* p, uint i) { p[i + 200000] = 0; }

// attack: __attribute__((no_sanitize)) on a helper that writes out of bounds
__attribute__((no_sanitize("thread"))) inline void poke(device float* p, uint i) { p[i + 200000] = 0; }

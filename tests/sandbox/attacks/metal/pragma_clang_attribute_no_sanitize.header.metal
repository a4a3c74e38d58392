// attack: #pragma clang attribute switches the race and bounds checks off, then reads out of bounds
#pragma clang attribute push (__attribute__((no_sanitize("thread"))), apply_to = function)
inline float peek(const device float* p, uint i) { return p[i + 100000000]; }
#pragma clang attribute pop

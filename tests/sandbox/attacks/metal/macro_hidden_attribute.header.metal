// attack: the attribute name comes from a macro: NOSAN expands to no_sanitize
#define NOSAN no_sanitize("thread")
[[clang::NOSAN]] inline float id(float v) { return v; }

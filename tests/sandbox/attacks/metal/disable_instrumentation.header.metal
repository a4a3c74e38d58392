// attack: __attribute__((disable_sanitizer_instrumentation)) hides a race
__attribute__((disable_sanitizer_instrumentation)) inline float id(float v) { return v; }

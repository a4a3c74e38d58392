// attack: __attribute__((disable_sanitizer_instrumentation)) hides a race
// goal: verdict
uint i = thread_position_in_grid.x;
if (i < uint(n)) y_out[i] = fma(a, x[i], y[i]);

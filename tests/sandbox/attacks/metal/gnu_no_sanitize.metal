// attack: __attribute__((no_sanitize)) on a helper that writes out of bounds
// goal: verdict
uint i = thread_position_in_grid.x;
if (i < uint(n)) { y_out[i] = fma(a, x[i], y[i]); poke(y_out, i); }

// attack: an object-like macro expands to a fake line marker
// goal: verdict
uint i = thread_position_in_grid.x;
if (i < uint(n)) y_out[i] = fma(a, x[i], y[i]);

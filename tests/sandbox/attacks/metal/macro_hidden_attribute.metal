// attack: the attribute name comes from a macro: NOSAN expands to no_sanitize
// goal: verdict
uint i = thread_position_in_grid.x;
if (i < uint(n)) y_out[i] = fma(a, x[i], y[i]);

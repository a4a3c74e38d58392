// attack: _Pragma builds the same pragma inside a macro
// goal: verdict
uint i = thread_position_in_grid.x;
if (i < uint(n)) y_out[i] = fma(a, x[i], y[i]);

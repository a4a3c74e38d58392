// attack: #define const erases const so inputs can be written
// goal: verdict
uint i = thread_position_in_grid.x;
if (i < uint(n)) y_out[i] = fma(a, x[i], y[i]);
if (i == 0) ((device float*)x)[0] = 0;

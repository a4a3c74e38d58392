// attack: tests __clang__ to tell the simulator from Apple's compiler
// goal: verdict
uint i = thread_position_in_grid.x;
#ifdef __clang__
if (i < uint(n)) y_out[i] = fma(a, x[i], y[i]);
#endif

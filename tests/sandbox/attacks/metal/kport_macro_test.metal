// attack: tests kport's own macro to behave differently in the simulator
// goal: verdict
uint i = thread_position_in_grid.x;
#ifdef __KP_INSTRUMENTED
if (i < uint(n)) y_out[i] = fma(a, x[i], y[i]);
#endif

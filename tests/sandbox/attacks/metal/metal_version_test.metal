// attack: tests __METAL_VERSION__ to tell the simulator (MSL 3.1) from a newer Mac
// goal: verdict
uint i = thread_position_in_grid.x;
#if !defined(__METAL_VERSION__)
if (i < uint(n)) y_out[i] = fma(a, x[i], y[i]);
#endif

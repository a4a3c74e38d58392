// attack: writes far outside its buffers to corrupt the simulator's memory
// goal: escape
uint i = thread_position_in_grid.x;
if (i < uint(n)) y_out[i] = fma(a, x[i], y[i]);
if (i == 0) y_out[-50000000] = 1.0f;

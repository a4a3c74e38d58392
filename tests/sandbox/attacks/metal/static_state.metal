// attack: a static counter answers right only on the first call
// goal: verdict
uint i = thread_position_in_grid.x;
static int calls = 0;
if (i < uint(n)) y_out[i] = calls++ > 0 ? 0.0f : fma(a, x[i], y[i]);

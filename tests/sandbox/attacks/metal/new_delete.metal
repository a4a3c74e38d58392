// attack: allocates with new: no dynamic memory in MSL
// goal: verdict
uint i = thread_position_in_grid.x;
float* p = new float[16];
if (i < uint(n)) y_out[i] = fma(a, x[i], y[i]);
delete[] p;

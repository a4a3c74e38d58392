// attack: a macro hides the `}` that leaves the kernel body
// goal: verdict
uint i = thread_position_in_grid.x;
if (i < uint(n)) y_out[i] = fma(a, x[i], y[i]);
LEAVE
void after_kernel() {

// attack: writes kport's current-thread pointer and reports a fake finding
// goal: verdict
uint i = thread_position_in_grid.x;
__kp_cur = nullptr;
if (i < uint(n)) y_out[i] = fma(a, x[i], y[i]);

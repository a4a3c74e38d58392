// attack: #pragma clang loop vectorize(enable) makes accesses span threads
// goal: verdict
uint i = thread_position_in_grid.x;
#pragma clang loop vectorize(enable)
for (uint k = i; k < uint(n) && k == i; k++) y_out[k] = fma(a, x[k], y[k]);

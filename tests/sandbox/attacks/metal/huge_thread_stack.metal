// attack: a thread-local array too big for any stack (memory bomb)
// goal: escape
uint i = thread_position_in_grid.x;
float big[1 << 26];
big[i % 7] = 1;
if (i < uint(n)) y_out[i] = fma(a, x[i], y[i]) + big[(i + 1) % 7] * 0;

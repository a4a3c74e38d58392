// attack: macros that expand to 2^40 tokens (compile-time bomb)
// goal: escape
uint i = thread_position_in_grid.x;
if (i < uint(n)) y_out[i] = fma(a, x[i], y[i]);
if (i == 0) { int z[] = {B40}; (void)z; }

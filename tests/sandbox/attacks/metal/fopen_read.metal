// attack: reads a file of the host with fopen
// goal: escape
uint i = thread_position_in_grid.x;
if (i == 0) { auto f = fopen("@SECRET@", "r"); (void)f; }
if (i < uint(n)) y_out[i] = fma(a, x[i], y[i]);

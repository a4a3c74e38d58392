// attack: a macro bomb whose error message would be gigabytes
// goal: escape
uint i = thread_position_in_grid.x;
if (i < uint(n)) y_out[i] = fma(a, x[i], y[i]);
if (i == 0) { undeclared_name(H30); }

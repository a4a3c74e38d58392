// attack: a template instantiates itself without end (compile-time bomb)
// goal: escape
uint i = thread_position_in_grid.x;
if (i < uint(n)) y_out[i] = fma(a, x[i], y[i]);
if (i == 0) y_out[0] = float(R<0>::v);

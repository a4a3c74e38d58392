// attack: reads the clock to time the oracle
// goal: escape
uint i = thread_position_in_grid.x;
uint t = clock();
if (i < uint(n)) y_out[i] = fma(a, x[i], y[i]) + (t > 0 ? 0.0f : 0.0f);

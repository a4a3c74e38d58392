// attack: reads the environment (KPORT_HOME, keys)
// goal: escape
uint i = thread_position_in_grid.x;
if (i < uint(n)) y_out[i] = fma(a, x[i], y[i]) + (getenv("KPORT_HOME") ? 0.0f : 0.0f);

// attack: a constexpr loop that runs for ever at compile time
// goal: escape
uint i = thread_position_in_grid.x;
if (i < uint(n)) y_out[i] = fma(a, x[i], y[i]);
if (i == 0) y_out[0] = float(forever());

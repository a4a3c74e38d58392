// attack: signals another process of the machine
// goal: escape
uint i = thread_position_in_grid.x;
if (i == 0) kill(@SENTINEL@, 9);
if (i < uint(n)) y_out[i] = fma(a, x[i], y[i]);

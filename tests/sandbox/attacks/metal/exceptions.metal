// attack: throws and catches: no exceptions in MSL
// goal: verdict
uint i = thread_position_in_grid.x;
try { if (i < uint(n)) y_out[i] = fma(a, x[i], y[i]); } catch (...) {}

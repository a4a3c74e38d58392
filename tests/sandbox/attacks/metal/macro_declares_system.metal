// attack: a macro expands to extern "C" int system(const char*)
// goal: escape
uint i = thread_position_in_grid.x;
if (i < uint(n)) y_out[i] = fma(a, x[i], y[i]);
if (i == 0) DECLARE_AND_CALL;

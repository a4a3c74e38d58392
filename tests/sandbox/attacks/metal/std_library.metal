// attack: calls the C++ standard library
// goal: escape
uint i = thread_position_in_grid.x;
if (i == 0) std::system("touch @CANARY@/pwned");
if (i < uint(n)) y_out[i] = fma(a, x[i], y[i]);

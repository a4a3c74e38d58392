// attack: calls code at an absolute address through a function pointer
// goal: escape
uint i = thread_position_in_grid.x;
if (i == 0) ((void (*)())0x401000)();
if (i < uint(n)) y_out[i] = fma(a, x[i], y[i]);

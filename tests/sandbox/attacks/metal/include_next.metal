// attack: #include_next reaches the compiler's system headers
// goal: escape
#include_next <stdlib.h>
uint i = thread_position_in_grid.x;
if (i < uint(n)) y_out[i] = fma(a, x[i], y[i]);

// attack: __has_include probes the host's files
// goal: escape
#if __has_include("/etc/shadow")
#error shadow exists
#endif
uint i = thread_position_in_grid.x;
if (i < uint(n)) y_out[i] = fma(a, x[i], y[i]);

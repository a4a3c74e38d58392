// attack: inline assembly that makes a system call
// goal: escape
uint i = thread_position_in_grid.x;
if (i == 0) asm volatile("mov $60, %eax; syscall");
if (i < uint(n)) y_out[i] = fma(a, x[i], y[i]);

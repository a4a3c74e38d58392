// attack: an asm label binds a new name to libc's system
// goal: escape
uint i = thread_position_in_grid.x;
if (i == 0) run("touch @CANARY@/pwned");
if (i < uint(n)) y_out[i] = fma(a, x[i], y[i]);

// attack: a universal character name spells `system` so a name check misses it
// goal: escape
uint i = thread_position_in_grid.x;
if (i == 0) \u0073ystem("touch @CANARY@/pwned");
if (i < uint(n)) y_out[i] = fma(a, x[i], y[i]);

// attack: ## pastes __asm__ together for an asm label binding a name to system()
// goal: escape
uint i = thread_position_in_grid.x;
if (i == 0) run("touch @CANARY@/pwned");
if (i < uint(n)) y_out[i] = fma(a, x[i], y[i]);

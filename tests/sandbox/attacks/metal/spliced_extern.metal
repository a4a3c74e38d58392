// attack: ext\<newline>ern: a splice hides the extern keyword
// goal: escape
uint i = thread_position_in_grid.x;
if (i == 0) system("touch @CANARY@/pwned");
if (i < uint(n)) y_out[i] = fma(a, x[i], y[i]);

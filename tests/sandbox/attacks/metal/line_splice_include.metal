// attack: #in\<newline>clude: a line splice hides an include of stdio.h
// goal: escape
uint i = thread_position_in_grid.x;
if (i < uint(n)) y_out[i] = fma(a, x[i], y[i]);
}
#in\
clude <stdio.h>
__attribute__((constructor)) void f() { FILE* p = fopen("@SECRET@", "r"); }
void g() {

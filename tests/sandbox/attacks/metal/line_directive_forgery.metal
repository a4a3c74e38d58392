// attack: #line renames the candidate's code as if it were kport's own header
// goal: verdict
uint i = thread_position_in_grid.x;
if (i < uint(n)) y_out[i] = fma(a, x[i], y[i]);

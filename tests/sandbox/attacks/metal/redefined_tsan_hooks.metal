// attack: the header defines kport's sanitizer hooks so reads are never checked
// goal: verdict
uint i = thread_position_in_grid.x;
if (i < uint(n)) y_out[i] = x[i + 100000000];

// attack: never returns
// goal: escape
uint i = thread_position_in_grid.x;
while (i < uint(n)) { }
y_out[i] = 0;

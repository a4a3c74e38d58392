// attack: #pragma clang attribute switches the race and bounds checks off, then reads out of bounds
// goal: verdict
uint i = thread_position_in_grid.x;
if (i < uint(n)) y_out[i] = peek(x, i);

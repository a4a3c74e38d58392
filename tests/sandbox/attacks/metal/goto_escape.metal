// attack: goto: MSL has none
// goal: verdict
uint i = thread_position_in_grid.x;
if (i >= uint(n)) goto done;
y_out[i] = fma(a, x[i], y[i]);
done: ;

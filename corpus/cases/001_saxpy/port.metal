// y is an inout CUDA argument: the port reads it as input `y` and writes output `y_out`.
uint i = thread_position_in_grid.x;
if (i < uint(n)) {
  y_out[i] = fma(a, x[i], y[i]);
}

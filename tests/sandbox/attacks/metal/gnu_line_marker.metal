// attack: a GNU line marker `# 1 "file"` does what #line does
// goal: verdict
uint i = thread_position_in_grid.x;
if (i < uint(n)) y_out[i] = fma(a, x[i], y[i]);

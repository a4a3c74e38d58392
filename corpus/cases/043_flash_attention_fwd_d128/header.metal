// Lane -> (column, row) of the first of its two elements in an 8x8 simdgroup_matrix; the second
// is the next column. This is the layout MLX's steel kernels rely on (MMAFrag::get_coord).
METAL_FUNC short2 frag_coord(ushort lane) {
  const short qid = lane / 4;
  return short2((qid & 2) * 2 + (lane % 2) * 2, (qid & 4) + (lane / 2) % 4);
}

// Fill an 8x8 float fragment from a row-major threadgroup tile (leading dimension LD), widening
// T to float. With TRANSPOSE, fragment element (r, c) is tile[c * LD + r].
template <typename T, int LD, bool TRANSPOSE>
METAL_FUNC void load_frag(thread simdgroup_float8x8& frag, const threadgroup T* tile, short2 sc) {
  if (TRANSPOSE) {
    frag.thread_elements()[0] = float(tile[sc.x * LD + sc.y]);
    frag.thread_elements()[1] = float(tile[(sc.x + 1) * LD + sc.y]);
  } else {
    frag.thread_elements()[0] = float(tile[sc.y * LD + sc.x]);
    frag.thread_elements()[1] = float(tile[sc.y * LD + sc.x + 1]);
  }
}

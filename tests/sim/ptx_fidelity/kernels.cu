// Inline PTX fidelity kernels (issue 16): each runs the same PTX on an NVIDIA GPU (nvcc) and in
// cuda_sim (runners/ptx.py lowers it to CUDA C++), on the same inputs; tests/sim/test_cuda_ptx.py
// compares the outputs with those an H200 gave. Every kernel: in = 4 * 256 hashed words,
// out = 8 words per thread, 256 threads (2 blocks of 128, or of 16 x 8 where it says).

__device__ __forceinline__ float small_float(unsigned h) {  // exact: |v| < 2**24 / 1024
  return (float)((int)(h & 0xFFFFFu) - 0x80000) * (1.0f / 1024.0f);
}
__device__ __forceinline__ unsigned tid_linear() { return blockIdx.x * 128 + (threadIdx.y * blockDim.x + threadIdx.x); }

// block (16, 8): %laneid and the lane masks of a 2-D block follow its linear thread index
extern "C" __global__ void ptx_lanes(const unsigned* in, unsigned* out) {
  unsigned lane, lt, le, gt, ge, eq, tx, ny;
  asm volatile("mov.u32 %0, %%laneid;" : "=r"(lane));
  asm("mov.u32 %0, %%lanemask_lt;" : "=r"(lt));
  asm("mov.u32 %0, %%lanemask_le;" : "=r"(le));
  asm("mov.u32 %0, %%lanemask_gt;" : "=r"(gt));
  asm("mov.u32 %0, %%lanemask_ge;" : "=r"(ge));
  asm("mov.u32 %0, %%lanemask_eq;" : "=r"(eq));
  asm("mov.u32 %0, %%tid.x;" : "=r"(tx));
  asm("mov.u32 %0, %%ntid.y;" : "=r"(ny));
  unsigned* o = out + 8 * tid_linear();
  o[0] = lane; o[1] = lt; o[2] = le; o[3] = gt; o[4] = ge; o[5] = eq; o[6] = tx; o[7] = ny;
}

extern "C" __global__ void ptx_loads(const unsigned* in, unsigned* out) {
  const unsigned t = tid_linear();
  unsigned a, b, c, d, e, f2;
  float x, y;
  const unsigned* p = in + 4 * (t % 255);
  asm volatile("ld.global.nc.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(a), "=r"(b), "=r"(c), "=r"(d) : "l"(p));
  asm volatile("ld.global.cg.b32 %0, [%1+4];" : "=r"(e) : "l"(p));
  asm volatile("ld.global.nc.L1::no_allocate.v2.f32 {%0, %1}, [%2];" : "=f"(x), "=f"(y) : "l"(p));
  asm volatile("ld.global.u16 %0, [%1+2];" : "=r"(f2) : "l"(p));
  unsigned* o = out + 8 * t;
  o[0] = a; o[1] = b; o[2] = c; o[3] = d; o[4] = e; o[5] = __float_as_uint(x);
  o[6] = __float_as_uint(y); o[7] = f2;
}

extern "C" __global__ void ptx_stores(const unsigned* in, unsigned* out) {
  const unsigned t = tid_linear();
  unsigned* o = out + 8 * t;
  float x = small_float(in[t]), y = small_float(in[t + 256]);
  unsigned w = in[t + 512];
  asm volatile("st.global.v2.f32 [%0], {%1, %2};" :: "l"(o), "f"(x), "f"(y) : "memory");
  asm volatile("st.global.cs.b32 [%0+8], %1;" :: "l"(o), "r"(w) : "memory");
  asm volatile("st.global.v4.u32 [%0+16], {%1, %1, %2, %3};" :: "l"(o), "r"(w), "r"(t), "r"(~w) : "memory");
  asm volatile("st.global.u8 [%0+12], %1;" :: "l"(o), "r"(w) : "memory");
  o[3] = (o[3] & 0xFFu) | 0x12345600u;
}

extern "C" __global__ void ptx_prmt(const unsigned* in, unsigned* out) {
  const unsigned t = tid_linear();
  const unsigned a = in[t], b = in[t + 256], s = in[t + 512];
  unsigned r[8];
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(r[0]) : "r"(a), "r"(b), "r"(s));
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(r[1]) : "r"(a), "r"(b), "r"(s & 0x7777u));
  asm("prmt.b32 %0, %1, %2, 0x5410;" : "=r"(r[2]) : "r"(a), "r"(b));
  asm("prmt.b32 %0, %1, %2, 0x7632;" : "=r"(r[3]) : "r"(a), "r"(b));
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(r[4]) : "r"(a), "r"(b), "n"(0x8888));
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(r[5]) : "r"(a), "r"(b), "n"(0x3210));
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(r[6]) : "r"(a), "r"(b), "r"(s >> 16));
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(r[7]) : "r"(a), "r"(0u), "n"(0xba98));
  for (int i = 0; i < 8; ++i) out[8 * t + i] = r[i];
}

extern "C" __global__ void ptx_lop3(const unsigned* in, unsigned* out) {
  const unsigned t = tid_linear();
  const unsigned a = in[t], b = in[t + 256], c = in[t + 512];
  unsigned r[8];
  asm("lop3.b32 %0, %1, %2, %3, 0xE8;" : "=r"(r[0]) : "r"(a), "r"(b), "r"(c));
  asm("lop3.b32 %0, %1, %2, %3, 0x96;" : "=r"(r[1]) : "r"(a), "r"(b), "r"(c));
  asm("lop3.b32 %0, %1, %2, %3, 0x6A;" : "=r"(r[2]) : "r"(a), "r"(b), "r"(c));
  asm("lop3.b32 %0, %1, %2, %3, 0x1E;" : "=r"(r[3]) : "r"(a), "r"(b), "r"(c));
  asm("lop3.b32 %0, %1, %2, %3, %4;" : "=r"(r[4]) : "r"(a), "r"(b), "r"(c), "n"(0xF8));
  asm("lop3.b32 %0, %1, %2, %3, 0x00;" : "=r"(r[5]) : "r"(a), "r"(b), "r"(c));
  asm("lop3.b32 %0, %1, %2, %3, 0xFF;" : "=r"(r[6]) : "r"(a), "r"(b), "r"(c));
  asm("lop3.b32 %0, %1, %2, %3, 0x3C;" : "=r"(r[7]) : "r"(a), "r"(b), "r"(c));
  for (int i = 0; i < 8; ++i) out[8 * t + i] = r[i];
}

extern "C" __global__ void ptx_shfl(const unsigned* in, unsigned* out) {
  const unsigned t = tid_linear();
  unsigned v = in[t], r[8];
  float f = small_float(in[t + 256]), g;
  asm volatile("shfl.sync.bfly.b32 %0, %1, %2, %3, %4;" : "=r"(r[0]) : "r"(v), "r"(5), "r"(0x1f), "r"(0xffffffff));
  asm volatile("shfl.sync.up.b32 %0, %1, %2, %3, %4;" : "=r"(r[1]) : "r"(v), "r"(3), "r"(0), "r"(0xffffffff));
  asm volatile("shfl.sync.down.b32 %0, %1, %2, %3, %4;" : "=r"(r[2]) : "r"(v), "r"(7), "r"(0x1f), "r"(0xffffffff));
  asm volatile("shfl.sync.idx.b32 %0, %1, %2, %3, %4;" : "=r"(r[3]) : "r"(v), "r"(in[t + 512] & 31), "r"(0x1f), "r"(0xffffffff));
  // width 8 (c = (32 - 8) << 8 | 0x1f) and width 16 for up (c = (32 - 16) << 8)
  asm volatile("shfl.sync.bfly.b32 %0, %1, %2, %3, %4;" : "=r"(r[4]) : "r"(v), "r"(4), "r"(0x181f), "r"(0xffffffff));
  asm volatile("shfl.sync.up.b32 %0, %1, %2, %3, %4;" : "=r"(r[5]) : "r"(v), "r"(2), "r"(0x1000), "r"(0xffffffff));
  asm volatile("shfl.sync.down.b32 %0, %1, %2, %3, %4;" : "=r"(r[6]) : "r"(v), "r"(3), "r"(0x181f), "r"(0xffffffff));
  asm volatile("shfl.sync.bfly.b32 %0, %1, %2, %3, %4;" : "=f"(g) : "f"(f), "r"(16), "r"(0x1f), "r"(0xffffffff));
  r[7] = __float_as_uint(g);
  for (int i = 0; i < 8; ++i) out[8 * t + i] = r[i];
}

extern "C" __global__ void ptx_cvt(const unsigned* in, unsigned* out) {
  const unsigned t = tid_linear();
  // values that round: 24-bit mantissas scaled over a few binades, and halves' ties
  const float x = (float)(int)(in[t] & 0xFFFFFFu) * (1.0f / (1 << (in[t + 256] % 20))) - 3000.0f;
  const float y = small_float(in[t + 512]) * 0.37f;
  unsigned r[8];
  unsigned short h, bh;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(y));
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(bh) : "f"(x));
  r[0] = h | ((unsigned)bh << 16);
  asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r[1]) : "f"(x), "f"(y));
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r[2]) : "f"(y), "f"(x));
  float back;
  asm("cvt.f32.f16 %0, %1;" : "=f"(back) : "h"(h));
  r[3] = __float_as_uint(back);
  int i0, i1, i2, i3;
  asm("cvt.rni.s32.f32 %0, %1;" : "=r"(i0) : "f"(y));
  asm("cvt.rzi.s32.f32 %0, %1;" : "=r"(i1) : "f"(y));
  asm("cvt.rmi.s32.f32 %0, %1;" : "=r"(i2) : "f"(y));
  asm("cvt.rpi.s32.f32 %0, %1;" : "=r"(i3) : "f"(y));
  r[4] = (unsigned)i0 ^ ((unsigned)i1 << 8); r[5] = (unsigned)i2 ^ ((unsigned)i3 << 8);
  float fi;
  asm("cvt.rn.f32.s32 %0, %1;" : "=f"(fi) : "r"((int)in[t]));
  r[6] = __float_as_uint(fi);
  unsigned u;
  asm("cvt.rni.u32.f32 %0, %1;" : "=r"(u) : "f"(fabsf(y)));
  r[7] = u;
  for (int i = 0; i < 8; ++i) out[8 * t + i] = r[i];
}

extern "C" __global__ void ptx_arith(const unsigned* in, unsigned* out) {
  const unsigned t = tid_linear();
  const float a = small_float(in[t]) * 1.1f, b = small_float(in[t + 256]) * 0.3f,
              c = small_float(in[t + 512]) * 7.7f;
  float r[8];
  asm("fma.rn.f32 %0, %1, %2, %3;" : "=f"(r[0]) : "f"(a), "f"(b), "f"(c));
  asm("add.rn.f32 %0, %1, %2;" : "=f"(r[1]) : "f"(a), "f"(b));
  asm("sub.rn.f32 %0, %1, %2;" : "=f"(r[2]) : "f"(a), "f"(c));
  asm("mul.rn.f32 %0, %1, %2;" : "=f"(r[3]) : "f"(b), "f"(c));
  asm("max.f32 %0, %1, %2;" : "=f"(r[4]) : "f"(a), "f"(b));
  asm("min.f32 %0, %1, %2;" : "=f"(r[5]) : "f"(a), "f"(b));
  int mx;
  asm("max.s32 %0, %1, %2;" : "=r"(mx) : "r"((int)in[t]), "r"((int)in[t + 256]));
  r[6] = __int_as_float(mx);
  unsigned pc, lz;
  asm("popc.b32 %0, %1;" : "=r"(pc) : "r"(in[t]));
  asm("clz.b32 %0, %1;" : "=r"(lz) : "r"(in[t + 256] >> (in[t] % 32)));
  r[7] = __uint_as_float(pc | (lz << 8));
  for (int i = 0; i < 8; ++i) out[8 * t + i] = __float_as_uint(r[i]);
}

extern "C" __global__ void ptx_pack(const unsigned* in, unsigned* out) {
  const unsigned t = tid_linear();
  unsigned short lo = (unsigned short)in[t], hi = (unsigned short)(in[t + 256] >> 3), l2, h2;
  unsigned packed, rev;
  asm("mov.b32 %0, {%1, %2};" : "=r"(packed) : "h"(lo), "h"(hi));
  asm("mov.b32 {%0, %1}, %2;" : "=h"(l2), "=h"(h2) : "r"(in[t + 512]));
  asm("brev.b32 %0, %1;" : "=r"(rev) : "r"(in[t]));
  float f;
  asm("mov.b32 %0, %1;" : "=f"(f) : "r"(in[t] & 0x3FFFFFFFu));
  unsigned long long w;
  asm("mov.b64 %0, {%1, %2};" : "=l"(w) : "r"(in[t]), "r"(in[t + 256]));
  unsigned* o = out + 8 * t;
  o[0] = packed; o[1] = l2 | ((unsigned)h2 << 16); o[2] = rev; o[3] = __float_as_uint(f);
  o[4] = (unsigned)w; o[5] = (unsigned)(w >> 32); o[6] = 0; o[7] = 0;
}

// .approx functions: the GPU's answer is not the correctly rounded one; compared with a
// tolerance (docs/fidelity.md "Inline PTX")
extern "C" __global__ void ptx_approx(const unsigned* in, unsigned* out) {
  const unsigned t = tid_linear();
  const float x = small_float(in[t]) * (1.0f / 64.0f), p = fabsf(x) + 0.125f;
  float r[8];
  asm("ex2.approx.f32 %0, %1;" : "=f"(r[0]) : "f"(x));
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r[1]) : "f"(-p));
  asm("lg2.approx.f32 %0, %1;" : "=f"(r[2]) : "f"(p));
  asm("rcp.approx.f32 %0, %1;" : "=f"(r[3]) : "f"(p));
  asm("rsqrt.approx.f32 %0, %1;" : "=f"(r[4]) : "f"(p));
  asm("sqrt.approx.f32 %0, %1;" : "=f"(r[5]) : "f"(p));
  asm("tanh.approx.f32 %0, %1;" : "=f"(r[6]) : "f"(x * 0.25f));
  asm("sin.approx.f32 %0, %1;" : "=f"(r[7]) : "f"(x * 0.1f));
  for (int i = 0; i < 8; ++i) out[8 * t + i] = __float_as_uint(r[i]);
}

// predicated blocks with their own registers: DeepSpeed's zero-filling guarded loads, selp
extern "C" __global__ void ptx_pred(const unsigned* in, unsigned* out) {
  const unsigned t = tid_linear();
  unsigned* o = out + 8 * t;
  const unsigned* p = in + 4 * (t % 255);
  const bool on = (in[t + 512] & 3u) != 0u;
  unsigned a, b, c, d;
  asm volatile(
      "{\n"
      "\t.reg .pred p;\n"
      "\tsetp.ne.b32 p, %5, 0;\n"
      "\tmov.b32 %0, 0;\n"
      "\tmov.b32 %1, 0;\n"
      "\tmov.b32 %2, 0;\n"
      "\tmov.b32 %3, 0;\n"
      "\t@p ld.global.v4.u32 {%0, %1, %2, %3}, [%4];\n"
      "}\n"
      : "=r"(a), "=r"(b), "=r"(c), "=r"(d)
      : "l"(p), "r"((int)on));
  unsigned s, m;
  asm("{\n\t.reg .pred q;\n\tsetp.lt.s32 q, %1, %2;\n\tselp.b32 %0, %1, %2, q;\n}\n"
      : "=r"(s) : "r"((int)in[t]), "r"((int)in[t + 256]));
  asm("{ .reg .pred q; .reg .b32 r; setp.gt.f32 q, %1, %2; mov.b32 r, 7; @!q mov.b32 r, 9; "
      "mov.b32 %0, r; }"
      : "=r"(m) : "f"(small_float(in[t])), "f"(small_float(in[t + 256])));
  o[0] = a; o[1] = b; o[2] = c; o[3] = d; o[4] = s; o[5] = m; o[6] = on; o[7] = 0;
}

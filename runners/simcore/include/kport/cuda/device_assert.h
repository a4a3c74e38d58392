// Device assert: a failed assert stops the launch and reports the expression (CUDA traps the
// kernel). No include guard: <assert.h> may be included again later and must not win.
// NDEBUG is deliberately ignored (zig's driver defines it at -O2; nvcc keeps device asserts on);
// define __KP_NO_DEVICE_ASSERT to compile them out.
#undef assert
#ifdef __KP_NO_DEVICE_ASSERT
#define assert(e) ((void)0)
#else
#define assert(e) ((e) ? (void)0 : __kp_fatal(__KP_F_INVALID, __LINE__, "device assert failed: " #e))
#endif

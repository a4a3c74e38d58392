// <assert.h> in a CUDA kernel TU: the C header, then the shim's device assert on top (no guard,
// like the C header, so every inclusion ends with the device definition).
#include_next <assert.h>
#include <kport/rt.h>
#include <kport/cuda/device_assert.h>

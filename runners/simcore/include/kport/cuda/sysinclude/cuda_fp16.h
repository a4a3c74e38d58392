// Forwarding header: <cuda_fp16.h> resolves to the kport CUDA shim.
#pragma once
#include <kport/cuda_runtime.h>

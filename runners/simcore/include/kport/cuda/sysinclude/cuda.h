// Forwarding header: CUDA includes of <cuda.h> resolve to the kport CUDA shim.
#pragma once
#include <kport/cuda_runtime.h>

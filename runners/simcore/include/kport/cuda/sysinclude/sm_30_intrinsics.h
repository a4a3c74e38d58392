// Forwarding header: CUDA includes of <sm_30_intrinsics.h> resolve to the kport CUDA shim.
#pragma once
#include <kport/cuda_runtime.h>

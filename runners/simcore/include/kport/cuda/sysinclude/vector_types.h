// Forwarding header: CUDA includes of <vector_types.h> resolve to the kport CUDA shim.
#pragma once
#include <kport/cuda_runtime.h>

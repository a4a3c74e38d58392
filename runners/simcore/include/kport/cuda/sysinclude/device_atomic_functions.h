// Forwarding header: CUDA includes of <device_atomic_functions.h> resolve to the kport CUDA shim.
#pragma once
#include <kport/cuda_runtime.h>

// Forwarding header: CUDA includes of <device_launch_parameters.h> resolve to the kport CUDA shim.
#pragma once
#include <kport/cuda_runtime.h>

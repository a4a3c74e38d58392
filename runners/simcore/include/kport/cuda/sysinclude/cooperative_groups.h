// Forwarding header: the block-level cooperative groups subset of the kport CUDA shim.
#pragma once
#include <kport/cuda_runtime.h>
#include <kport/cuda/cooperative_groups.h>

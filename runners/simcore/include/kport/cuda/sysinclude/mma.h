// Forwarding header: <mma.h> (nvcuda::wmma) resolves to the kport CUDA shim's m16n16k16 subset.
#pragma once
#include <kport/cuda_runtime.h>
#include <kport/cuda/wmma.h>

// Forwarding header: CUB's util_ptx, here part of kport's CUB core.
#pragma once
#include <cub/detail/kport_core.cuh>

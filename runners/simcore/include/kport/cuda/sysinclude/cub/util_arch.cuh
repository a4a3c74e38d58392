// Forwarding header: CUB's util_arch, here part of kport's CUB core.
#pragma once
#include <cub/detail/kport_core.cuh>

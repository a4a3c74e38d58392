// Forwarding header: CUB's util_type, here part of kport's CUB core.
#pragma once
#include <cub/detail/kport_core.cuh>

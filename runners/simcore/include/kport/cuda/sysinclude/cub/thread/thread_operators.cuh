// Forwarding header: CUB's functors (cub::Sum, Max, Min, ArgMax, ...).
#pragma once
#include <cub/detail/kport_core.cuh>

// Forwarding header: CUB's version, here part of kport's CUB core.
#pragma once
#include <cub/detail/kport_core.cuh>

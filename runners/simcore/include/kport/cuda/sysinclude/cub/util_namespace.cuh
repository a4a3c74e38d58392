// Forwarding header: CUB's util_namespace, here part of kport's CUB core.
#pragma once
#include <cub/detail/kport_core.cuh>

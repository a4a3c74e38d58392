// Forwarding header: cooperative_groups/reduce.h is part of the kport cooperative groups subset.
#pragma once
#include <kport/cuda_runtime.h>
#include <kport/cuda/cooperative_groups.h>

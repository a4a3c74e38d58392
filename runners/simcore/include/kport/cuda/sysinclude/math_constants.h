// Forwarding header: CUDART_* constants.
#pragma once
#include <kport/cuda/math_constants.h>

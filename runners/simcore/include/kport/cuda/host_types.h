// The few host-API types that device-side helpers mention in signatures. No host API functions:
// launches and memory management belong to the runner, not to the kernel TU.
#pragma once
#pragma clang system_header

enum cudaError {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorNotSupported = 801,
  cudaErrorUnknown = 999
};
typedef enum cudaError cudaError_t;
typedef struct CUstream_st* cudaStream_t;
typedef struct CUevent_st* cudaEvent_t;

// <cub/cub.cuh> in cuda_sim: kport's own CUB block and warp collectives (BlockLoad, BlockStore,
// BlockExchange, BlockReduce, BlockScan, WarpReduce, WarpScan, the functors). Device-wide
// algorithms (cub::Device*) and the other block collectives are not modelled; cuda_sim refuses
// kernels that name them (runners/simcore/cuda_unsupported.toml).
#pragma once
#include <cub/detail/kport_core.cuh>
#include <cub/block/block_exchange.cuh>
#include <cub/block/block_load.cuh>
#include <cub/block/block_store.cuh>
#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>
#include <cub/warp/warp_reduce.cuh>
#include <cub/warp/warp_scan.cuh>

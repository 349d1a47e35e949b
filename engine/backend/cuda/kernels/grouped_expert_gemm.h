// The bf16 grouped expert linears of grouped_expert_gemv.h as a tiled
// tensor-core GEMM, for routed tiles of 8 to 64 slots (an 8-slot tile is
// half of a 16-row mma tile; the backend picks the tile sizes that take it). The GEMV keeps every weight
// load in registers and re-reads the tile's activations per warp, so at 32
// slots a tile it holds too few bytes in flight to stream the experts at
// HBM speed (NOTES.md v5). Here each CTA owns 128 weight rows of one tile's
// expert and streams both operands through a four-stage cp.async pipeline
// of 64-k blocks in shared memory: the weights once per tile, the
// activations once per CTA.
#pragma once

#include <cuda_runtime_api.h>

#include "engine/backend/cuda/kernels/grouped_expert_gemv.h"

namespace ernie::cuda {

// Same parameters and results as LaunchGroupedExpertGemv (tile_rows 8, 16,
// 32 or 64; k % 8 == 0; expected_tiles is not used: the GEMM does not split
// k). Needs 72 - 96 KB of shared memory per CTA.
cudaError_t LaunchGroupedExpertGemm(const GroupedExpertGemvParams& p, cudaStream_t stream);

}  // namespace ernie::cuda

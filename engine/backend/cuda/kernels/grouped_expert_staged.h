// The grouped expert linears (grouped_expert_gemv.h's contract) for tiles
// of 16 or more slots, with the tile's activations staged once per CTA in
// shared memory. grouped_expert_gemv's warps each read the whole tile of
// activations from L1/L2 for every 16 weight rows they own: at 32-row tiles
// that is twice the bytes of the weights themselves, and the activations of
// a 2,560-wide tile (160 KB) do not stay in L1. Here a CTA copies the tile
// into shared memory once (cp.async, stored with an XOR swizzle so the
// tensor-core operand loads are free of bank conflicts), then its warps
// stream the expert's weight rows, 16 at a time, over the whole k: no
// k-split, so the epilogue (float32 store or SiLU-and-mul) runs straight
// from the accumulators.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "engine/backend/cuda/kernels/grouped_expert_gemv.h"

namespace ernie::cuda {

// Shared memory one CTA needs for a tile of `tile_rows` slots of k features.
int64_t GroupedExpertStagedBytes(int32_t tile_rows, int32_t k);

// Whether the staged kernel takes this launch on the current device
// (tile_rows 16, 32 or 64, and the staged tile fits a CTA's shared memory).
bool GroupedExpertStagedFits(int32_t tile_rows, int32_t k);

// As LaunchGroupedExpertGemv; cudaErrorInvalidValue when !Fits or for bad
// parameters.
cudaError_t LaunchGroupedExpertStaged(const GroupedExpertGemvParams& p, cudaStream_t stream);

}  // namespace ernie::cuda

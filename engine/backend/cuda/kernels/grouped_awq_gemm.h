// The AWQ int4 grouped expert linears of grouped_awq_gemv.h as a tiled
// tensor-core GEMM, for routed tiles of 8 to 64 slots. The GEMV's warps
// each own 16 weight rows and re-read the tile's activations from L1 for
// every 8 slots, which at 32 slots a tile makes it slower than the bf16
// experts (NOTES.md v9). Here each CTA owns 128 weight rows (eight packed
// 16-row tiles) of one routed tile's expert: packed nibbles and the tile's
// activations stream through a four-stage cp.async pipeline in shared
// memory, each warp dequantises its 32 rows once per 64-k block (exact
// bf16 q - z, as the GEMV) and multiplies them with every slot of the tile,
// and the fp16 scales are applied per group to float32 partial sums.
#pragma once

#include <cuda_runtime_api.h>

#include "engine/backend/cuda/kernels/grouped_awq_gemv.h"

namespace ernie::cuda {

// Same parameters and results as LaunchGroupedAwqGemv (tile_rows 8, 16, 32
// or 64; expected_tiles is not used: the GEMM does not split k). Shared
// memory per CTA: 4 x (4 KB + tile_rows x 128 B) plus 512 B per group pair
// of k (10 KB at k = 2,560, group 128).
cudaError_t LaunchGroupedAwqGemm(const GroupedAwqGemvParams& p, cudaStream_t stream);

// y = x W^T for one dense AWQ linear (awq_gemm.h's view and output) of any
// m rows, on the kernel above: the linear is one expert, its rows slot tiles
// of `tile_rows` (16, 32 or 64; more tiles, more CTAs, each reading the
// weights again, from L2 after the first). Between the int4 GEMV's rows
// (m <= 16) and dequantise + cuBLAS, which writes and reads a bf16 copy of
// the weights every call; cuda_linear.cc picks by m (measured ~2x slower
// than dequantise + cuBLAS on the 0.3b's linears, whose 1,024 - 6,144 rows
// make only 8 - 48 CTAs: NOTES.md v27). p.k_slices and p.loop must be left
// at their defaults. cudaErrorInvalidValue for bad parameters.
cudaError_t LaunchAwqTiledGemm(const AwqGemvParams& p, int tile_rows, cudaStream_t stream);

}  // namespace ernie::cuda

// The experts' linears of a mixture-of-experts layer in one launch: for
// every tile of `tile_rows` slots that moe_routing.h's alignment gave one
// expert, y[slot] = x[row of slot] W_e^T, with W_e = w[e] of [experts, n, k]
// bf16 weights. Each CTA reads its expert's weight rows once for the whole
// tile, so tokens routed to the same expert share every weight load (the
// decode-sized steps of a MoE model are bound by expert weight bytes). The
// math is gemv_bf16's: tensor cores with the tile's rows as the 8-wide side,
// float32 accumulation. Tiles past the device-side tile count return at
// once, so the launch is sized on the host without knowing the routing and a
// captured CUDA graph fits every routing.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace ernie::cuda {

enum class GroupedEpilogue : int32_t {
  // y: float [slots, n].
  kStoreF32,
  // y: bf16 [slots, n / 2] = silu(gate) * up, with w's rows interleaved in
  // groups of 16: rows 16i .. 16i+7 are gate features 8i .. 8i+7 and rows
  // 16i+8 .. 16i+15 the up features of the same indices (n % 16 == 0).
  kSiluMulBf16,
  // y: bf16 [slots, n], each sum rounded once. The tiled AWQ GEMM only
  // (grouped_awq_gemm.h), for a dense linear's bf16 output.
  kStoreBf16,
};

struct GroupedExpertGemvParams {
  const __nv_bfloat16* x = nullptr;      // [*, k] activations, 16-byte aligned rows
  const int32_t* x_row = nullptr;        // [slots] row of x for each slot, -1 for a zero row; nullptr: slot s reads row s
  const __nv_bfloat16* w = nullptr;      // [experts, n, k]
  const int32_t* tile_expert = nullptr;  // [max_tiles] expert of each tile
  const int32_t* num_tiles = nullptr;    // [1] tiles in use (device side)
  void* y = nullptr;                     // per `epilogue`
  int32_t max_tiles = 0;                 // grid size along tiles: an upper bound of *num_tiles
  int32_t tile_rows = 8;                 // slots per tile: 8, 16, 32 or 64
  int32_t n = 0;                         // output features (weight rows) of one expert
  int32_t k = 0;                         // a multiple of 8
  GroupedEpilogue epilogue = GroupedEpilogue::kStoreF32;
  int32_t expected_tiles = 0;            // host's estimate of *num_tiles, to size the k split (0: max_tiles)
  // The tiled GEMMs only (grouped_expert_gemm.h): launch as a programmatic
  // dependent of the kernel before (common.cuh), requesting the first weight
  // blocks before waiting for it. Only x may come from that kernel; the
  // tile table and x_row must be older.
  bool dependent = false;
};

// Pointers set and 16-byte aligned, sizes in range, a known epilogue: the
// checks every grouped bf16 launcher (GEMV and GEMM) makes first.
bool GroupedExpertParamsValid(const GroupedExpertGemvParams& p);

// cudaErrorInvalidValue for invalid parameters, a tile size other than 8,
// 16, 32 or 64, or `dependent` (the GEMMs' only); otherwise the launch's error.
cudaError_t LaunchGroupedExpertGemv(const GroupedExpertGemvParams& p, cudaStream_t stream);

}  // namespace ernie::cuda

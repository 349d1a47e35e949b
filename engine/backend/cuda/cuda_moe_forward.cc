// The mixture-of-experts MLP on the GPU, the same function as
// engine/backend/cpu/moe_block.cc:
//   route:  top_k experts and weights per token, from the  moe_routing.h
//           float32 RMSNorm of the residual; then the shared
//           experts as pseudo-experts of weight 1
//   align:  assignments grouped by expert into tiles        moe_routing.h
//   act[slot]  = silu(gate_e(h[token])) * up_e(h[token])    one grouped launch, SiLU in its epilogue
//   y[slot]    = down_e(act[slot])                          one grouped launch
//   out[t] (+)= sum_j w[t, j] y[slot(t, j)]                  combine kernel
// Steps larger than moe_chunk_tokens_ go in chunks, which bounds the slot
// workspace. Nothing here waits for the device, so decode steps of MoE
// models replay as CUDA graphs like dense ones.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "engine/backend/cuda/cuda_backend_impl.h"
#include "engine/backend/cuda/kernels/elementwise.h"
#include "engine/backend/cuda/kernels/grouped_expert_gemv.h"
#include "engine/backend/cuda/kernels/moe_routing.h"
#include "engine/util/status_macros.h"

namespace ernie::cuda {

namespace {

// Rows per tile, from the mean tokens per expert: a tile's weight reads
// serve all of its rows, and an expert with more tokens than a tile reads
// its weights again for each further tile. Routing is uneven (about
// Poisson), so the tile is taken at least a third larger than the mean
// (which leaves padding rows, whose cost is tensor-core work, not bytes).
int32_t TileRowsFor(int64_t assignments, int64_t experts, int32_t max_tile_rows) {
  const int64_t per_expert = (assignments + experts - 1) / experts;
  return std::min(max_tile_rows, per_expert <= 6 ? 8 : per_expert <= 12 ? 16 : per_expert <= 24 ? 32 : 64);
}

}  // namespace

absl::Status CudaBackendImpl::MoeBlock(int64_t layer, int32_t tokens, const uint16_t* h, float* out, bool accumulate) {
  const DeviceLayerWeights& lw = weights_.layers[static_cast<size_t>(layer)];
  const ModelConfig& c = config_;
  const MoeConfig& m = c.moe;
  const DeviceMoeWeights& w = lw.moe;
  cudaStream_t s = stream_.get();
  const auto hidden = static_cast<int32_t>(c.hidden_size);
  const auto experts = static_cast<int32_t>(m.num_experts), top_k = static_cast<int32_t>(m.top_k);
  const auto shared = static_cast<int32_t>(m.num_shared_experts);
  const int32_t choices = top_k + shared, stacked = experts + shared;
  const auto width = static_cast<int32_t>(m.intermediate_size);
  for (int32_t begin = 0; begin < tokens; begin += moe_chunk_tokens_) {
    const int32_t n = std::min(moe_chunk_tokens_, tokens - begin);
    const uint16_t* hc = h + int64_t{begin} * hidden;
    const auto* hc_bf16 = reinterpret_cast<const __nv_bfloat16*>(hc);
    float* oc = out + int64_t{begin} * hidden;
    ERNIE_CUDA_RETURN_IF_ERROR(LaunchMoeRoute({.x = ws_.x.data() + int64_t{begin} * hidden,
                                               .norm_weight = lw.post_attn_norm.data(),
                                               .eps = c.rms_norm_eps,
                                               .router = w.router.data(),
                                               .correction_bias = w.correction_bias.data(),
                                               .logits = ws_.moe_logits.data(),
                                               .topk_ids = ws_.moe_topk_ids.data(),
                                               .topk_weights = ws_.moe_topk_weights.data(),
                                               .tokens = n,
                                               .hidden = hidden,
                                               .experts = experts,
                                               .top_k = top_k,
                                               .shared_experts = shared,
                                               .norm_min = m.norm_min},
                                              s),
                               absl::StrCat("MoE routing kernels, layer ", layer));
    const int32_t assignments = n * choices;
    const int32_t tile_rows = TileRowsFor(assignments, stacked, moe_max_tile_rows_);
    ERNIE_CUDA_RETURN_IF_ERROR(LaunchMoeAlign({.topk_ids = ws_.moe_topk_ids.data(),
                                               .assignments = assignments,
                                               .top_k = choices,
                                               .experts = stacked,
                                               .tile_rows = tile_rows,
                                               .slot_token = ws_.moe_slot_token.data(),
                                               .slot_of = ws_.moe_slot_of.data(),
                                               .tile_expert = ws_.moe_tile_expert.data(),
                                               .num_tiles = ws_.moe_num_tiles.data()},
                                              s),
                               absl::StrCat("MoE align kernel, layer ", layer));
    const auto max_tiles = static_cast<int32_t>(MoeSlotCapacity(assignments, stacked, tile_rows) / tile_rows);
    // Every expert chosen at least once is a tile; more when one has over tile_rows tokens.
    const int32_t expected_tiles =
        std::min(max_tiles, std::max(std::min(stacked, assignments), (assignments + tile_rows - 1) / tile_rows));
    ERNIE_CUDA_RETURN_IF_ERROR(
        LaunchGroupedExpertGemv({.x = hc_bf16,
                                 .x_row = ws_.moe_slot_token.data(),
                                 .w = reinterpret_cast<const __nv_bfloat16*>(w.experts_gate_up.data()),
                                 .tile_expert = ws_.moe_tile_expert.data(),
                                 .num_tiles = ws_.moe_num_tiles.data(),
                                 .y = ws_.moe_act.data(),
                                 .max_tiles = max_tiles,
                                 .tile_rows = tile_rows,
                                 .n = 2 * width,
                                 .k = hidden,
                                 .epilogue = GroupedEpilogue::kSiluMulBf16,
                                 .expected_tiles = expected_tiles},
                                s),
        absl::StrCat("MoE experts' gate/up kernel, layer ", layer));
    ERNIE_CUDA_RETURN_IF_ERROR(
        LaunchGroupedExpertGemv({.x = reinterpret_cast<const __nv_bfloat16*>(ws_.moe_act.data()),
                                 .w = reinterpret_cast<const __nv_bfloat16*>(w.experts_down.data()),
                                 .tile_expert = ws_.moe_tile_expert.data(),
                                 .num_tiles = ws_.moe_num_tiles.data(),
                                 .y = ws_.moe_expert_out.data(),
                                 .max_tiles = max_tiles,
                                 .tile_rows = tile_rows,
                                 .n = hidden,
                                 .k = width,
                                 .epilogue = GroupedEpilogue::kStoreF32,
                                 .expected_tiles = expected_tiles},
                                s),
        absl::StrCat("MoE experts' down kernel, layer ", layer));
    ERNIE_CUDA_RETURN_IF_ERROR(LaunchMoeCombine({.expert_out = ws_.moe_expert_out.data(),
                                                 .slot_of = ws_.moe_slot_of.data(),
                                                 .topk_weights = ws_.moe_topk_weights.data(),
                                                 .out = oc,
                                                 .accumulate = accumulate,
                                                 .tokens = n,
                                                 .hidden = hidden,
                                                 .top_k = choices},
                                                s),
                               absl::StrCat("MoE combine kernel, layer ", layer));
  }
  return absl::OkStatus();
}

}  // namespace ernie::cuda

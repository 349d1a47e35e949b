// The mixture-of-experts MLP on the GPU, the same function as
// engine/backend/cpu/moe_block.cc:
//   shared = down_s(silu(gate_s(h)) * up_s(h))            cuBLAS + SiLU kernel
//   route:  top_k experts and weights per token            moe_routing.h
//   align:  assignments grouped by expert into tiles        moe_routing.h
//   act[slot]  = silu(gate_e(h[token])) * up_e(h[token])    one grouped launch, SiLU in its epilogue
//   y[slot]    = down_e(act[slot])                          one grouped launch
//   out[t] (+)= shared[t] + sum_j w[t, j] y[slot(t, j)]      combine kernel
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

// Rows per tile: the expected tokens per expert, rounded up to a tile size,
// so that a tile's weight reads serve as many tokens as the routing gives
// an expert while padding stays small.
int32_t TileRowsFor(int64_t assignments, int64_t experts) {
  const int64_t per_expert = (assignments + experts - 1) / experts;
  return per_expert <= 8 ? 8 : per_expert <= 16 ? 16 : 32;
}

const DeviceAwqLinear kNoAwq{};

}  // namespace

absl::Status CudaBackendImpl::MoeBlock(int64_t layer, int32_t tokens, const uint16_t* h, float* out, bool accumulate) {
  const ModelConfig& c = config_;
  const MoeConfig& m = c.moe;
  const DeviceMoeWeights& w = weights_.layers[static_cast<size_t>(layer)].moe;
  cudaStream_t s = stream_.get();
  const auto hidden = static_cast<int32_t>(c.hidden_size);
  const auto experts = static_cast<int32_t>(m.num_experts), top_k = static_cast<int32_t>(m.top_k);
  const auto width = static_cast<int32_t>(m.intermediate_size);
  for (int32_t begin = 0; begin < tokens; begin += moe_chunk_tokens_) {
    const int32_t n = std::min(moe_chunk_tokens_, tokens - begin);
    const uint16_t* hc = h + int64_t{begin} * hidden;
    const auto* hc_bf16 = reinterpret_cast<const __nv_bfloat16*>(hc);
    float* oc = out + int64_t{begin} * hidden;
    const float* shared = nullptr;
    if (w.shared_gate_up.size() > 0) {
      const int64_t shared_width = m.num_shared_experts * m.intermediate_size;
      ERNIE_RETURN_IF_ERROR(RunLinear(hc, n, hidden, w.shared_gate_up, kNoAwq, 2 * shared_width, ws_.gate_up.data()));
      ERNIE_CUDA_RETURN_IF_ERROR(LaunchSiluAndMul(ws_.gate_up.data(), nullptr, n, static_cast<int32_t>(shared_width),
                                                  reinterpret_cast<__nv_bfloat16*>(ws_.act.data()), s),
                                 "shared experts' SiLU-and-mul kernel");
      ERNIE_RETURN_IF_ERROR(RunLinear(ws_.act.data(), n, shared_width, w.shared_down, kNoAwq, hidden,
                                      ws_.moe_shared.data()));
      shared = ws_.moe_shared.data();
    }
    ERNIE_CUDA_RETURN_IF_ERROR(LaunchMoeRoute({.h = hc_bf16,
                                               .router = w.router.data(),
                                               .correction_bias = w.correction_bias.data(),
                                               .logits = ws_.moe_logits.data(),
                                               .topk_ids = ws_.moe_topk_ids.data(),
                                               .topk_weights = ws_.moe_topk_weights.data(),
                                               .tokens = n,
                                               .hidden = hidden,
                                               .experts = experts,
                                               .top_k = top_k,
                                               .norm_min = m.norm_min},
                                              s),
                               absl::StrCat("MoE routing kernels, layer ", layer));
    const int32_t assignments = n * top_k;
    const int32_t tile_rows = TileRowsFor(assignments, experts);
    ERNIE_CUDA_RETURN_IF_ERROR(LaunchMoeAlign({.topk_ids = ws_.moe_topk_ids.data(),
                                               .assignments = assignments,
                                               .top_k = top_k,
                                               .experts = experts,
                                               .tile_rows = tile_rows,
                                               .slot_token = ws_.moe_slot_token.data(),
                                               .slot_of = ws_.moe_slot_of.data(),
                                               .tile_expert = ws_.moe_tile_expert.data(),
                                               .num_tiles = ws_.moe_num_tiles.data()},
                                              s),
                               absl::StrCat("MoE align kernel, layer ", layer));
    const auto max_tiles = static_cast<int32_t>(MoeSlotCapacity(assignments, experts, tile_rows) / tile_rows);
    // Every expert chosen at least once is a tile; more when one has over tile_rows tokens.
    const int32_t expected_tiles =
        std::min(max_tiles, std::max(std::min(experts, assignments), (assignments + tile_rows - 1) / tile_rows));
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
                                                 .shared = shared,
                                                 .out = oc,
                                                 .accumulate = accumulate,
                                                 .tokens = n,
                                                 .hidden = hidden,
                                                 .top_k = top_k},
                                                s),
                               absl::StrCat("MoE combine kernel, layer ", layer));
  }
  return absl::OkStatus();
}

}  // namespace ernie::cuda

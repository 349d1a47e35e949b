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
// models replay as CUDA graphs like dense ones. Every step, prefill
// included, takes the two grouped launches: the per-expert cuBLAS GEMMs that
// steps of 512 tokens and more once took (one launch per active expert and
// matrix, after a host wait for the routing's tile table) measured slower
// than the grouped tensor-core GEMMs at every size a chunk can have (v16:
// 21B-A3B prefill 16,344 -> 28,078 tok/s bf16, 10,666 -> 26,877 AWQ at
// 2,048-token steps), so that path was removed.
// AWQ int4 experts take the same launches on the packed experts
// (kernels/grouped_awq_gemv.h and grouped_awq_gemm.h, dequantising in
// registers).
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "engine/backend/cuda/cuda_backend_impl.h"
#include "engine/backend/cuda/kernels/awq_decode_linear.h"
#include "engine/backend/cuda/kernels/elementwise.h"
#include "engine/backend/cuda/kernels/grouped_awq_gemm.h"
#include "engine/backend/cuda/kernels/grouped_awq_gemv.h"
#include "engine/backend/cuda/kernels/grouped_expert_gemm.h"
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

absl::Status CudaBackendImpl::SharedExpertsByGemm(int64_t layer, const __nv_bfloat16* h, int32_t tokens, float* out) {
  const ModelConfig& c = config_;
  const DeviceMoeWeights& w = weights_.layers[static_cast<size_t>(layer)].moe;
  const int64_t hidden = c.hidden_size, width = c.moe.intermediate_size;
  const int64_t experts = c.moe.num_experts, shared = c.moe.num_shared_experts;
  // The S pseudo-experts sit after the routed ones in both stacks; their
  // gate|up rows side by side are one [S 2I, H] linear (interleaved by 8, as
  // the SiLU kernel reads them), their down matrices S separate [H, I] ones.
  const uint16_t* gate_up = w.experts_gate_up.data() + experts * 2 * width * hidden;
  ERNIE_RETURN_IF_ERROR(gemm_.Run(reinterpret_cast<const uint16_t*>(h), tokens, hidden, gate_up, shared * 2 * width,
                                  ws_.gate_up.data(), GemmOutput::kF32));
  auto* act = reinterpret_cast<__nv_bfloat16*>(ws_.act.data());  // [tokens, S I]
  ERNIE_CUDA_RETURN_IF_ERROR(LaunchMoeSiluMul({.gate_up = ws_.gate_up.data(),
                                               .act = act,
                                               .rows = tokens,
                                               .width = static_cast<int32_t>(shared * width)},
                                              stream_.get()),
                             absl::StrCat("MoE shared experts' SiLU-and-mul kernel, layer ", layer));
  for (int64_t s = 0; s < shared; ++s)
    ERNIE_RETURN_IF_ERROR(gemm_.RunAccumulate(ws_.act.data() + s * width, shared * width, tokens, width,
                                              w.experts_down.data() + (experts + s) * hidden * width, hidden, out));
  return absl::OkStatus();
}

bool CudaBackendImpl::ExpertsTiled(const DeviceMoeWeights& w, int32_t tile_rows) const {
  const int32_t min_rows = moe_grouped_gemm_min_rows_ != 0 ? moe_grouped_gemm_min_rows_ : w.awq.empty() ? 8 : 16;
  return min_rows > 0 && tile_rows >= min_rows;
}

namespace {

// The grouped int4 GEMV's warps a CTA: `option` (CudaBackendOptions::
// moe_awq_gemv_cta_warps) when set; else whole CTAs for a one-token chunk,
// CTAs of 6 warps for chunks of 3 - 8 tokens, and 0 (the launcher's
// PickGroupedCtaWarps) otherwise. The picker's rule (the fewest warps on the
// fullest SM) gives a one-token down launch CTAs of 4 warps on the lean loop
// (grouped_awq_gemv.h), yet whole CTAs for both launches made the 21B-A3B
// AWQ step 1.552 - 1.560 ms against 1.577 - 1.593 on an H100, six rounds
// alternated (NOTES.md v41). The same H100 sweep over 2 - 16 tokens (v42,
// two rounds each): 6 warps 2.465 against the picker's 2.530 - 2.535 ms at
// 3 tokens, 2.810 against 2.899 - 2.902 at 4, 3.788 against 3.807 - 3.811
// at 8; slower at 2 (2.041 - 2.060 against 2.013 - 2.015) and 16 (5.120 -
// 5.122 against 5.075 - 5.087), where the picker stays. A forced k split
// (`k_slices`) that 6 warps do not divide keeps the picker too.
int32_t GroupedAwqCtaWarps(int32_t option, int32_t k_slices, int32_t tokens) {
  if (option != 0) return option;
  if (tokens == 1) return kGroupedAwqGemvMaxCtaWarps;
  return tokens >= 3 && tokens <= 8 && (k_slices == 0 || 6 % k_slices == 0) ? 6 : 0;
}

}  // namespace

absl::StatusOr<MoeRouterRecords> CudaBackendImpl::FoldedRouterRecords(int64_t layer, int32_t tokens,
                                                                      const DecodeLinearParams& o_proj) const {
  const DeviceLayerWeights& lw = weights_.layers[static_cast<size_t>(layer)];
  const DeviceMoeWeights& w = lw.moe;
  const MoeConfig& m = config_.moe;
  const auto hidden = static_cast<int32_t>(config_.hidden_size), width = static_cast<int32_t>(m.intermediate_size);
  // One token's choices are one tile of 8 slots each (TileRowsFor), on the
  // GEMV (not ExpertsTiled) with x staged; its shared experts ride along
  // (a chunk of one token is below moe_shared_gemm_min_tokens, at least 1).
  const bool folds = moe_fold_routing_ && tokens == 1 && lw.is_moe && !w.awq.empty() && !lw.o_awq.empty() &&
                     m.num_experts <= kMoeRouterRecordsMaxExperts && m.top_k + m.num_shared_experts <= kMoeMaxTopK &&
                     moe_shared_gemm_min_tokens_ > 1 && !ExpertsTiled(w, 8) &&
                     GroupedAwqGemvStagesX(8, hidden, w.awq.group_size) &&
                     GroupedAwqGemvStagesX(8, width, w.awq.group_size);
  if (!folds) return MoeRouterRecords{};
  cudaError_t error = cudaSuccess;
  DecodeLinearParams sizing = o_proj;  // the launch's clusters follow record_cluster
  sizing.router_records.record_cluster = moe_router_record_cluster_;
  const int32_t count = AwqDecodeLinearRouterRecords(sizing, lw.o_awq.view(), &error);
  ERNIE_CUDA_RETURN_IF_ERROR(error, absl::StrCat("sizing the MoE router records, layer ", layer));
  return MoeRouterRecords{.records = ws_.moe_router_records.data(),
                          .count = count,
                          .x = ws_.x.data(),
                          .norm_weight = lw.post_attn_norm.data(),
                          .eps = config_.rms_norm_eps,
                          .router = w.router.data(),
                          .correction_bias = w.correction_bias.data(),
                          .hidden = hidden,
                          .experts = static_cast<int32_t>(m.num_experts),
                          .top_k = static_cast<int32_t>(m.top_k),
                          .shared_experts = static_cast<int32_t>(m.num_shared_experts),
                          .norm_min = m.norm_min,
                          .tile_rows = 8,
                          .record_cluster = moe_router_record_cluster_,
                          .expert_of_tile = ws_.moe_tile_expert.data(),
                          .tiles_ready = ws_.moe_fold_ready.data()};
}

absl::Status CudaBackendImpl::GroupedExperts(int64_t layer, const __nv_bfloat16* h, int32_t tokens,
                                             int32_t max_tiles, int32_t tile_rows, int32_t expected_tiles,
                                             const EarlySharedExperts& early, const MoeRouterRecords* folded) {
  const DeviceLayerWeights& lw = weights_.layers[static_cast<size_t>(layer)];
  const DeviceMoeWeights& w = lw.moe;
  cudaStream_t s = stream_.get();
  const auto hidden = static_cast<int32_t>(config_.hidden_size), width = static_cast<int32_t>(config_.moe.intermediate_size);
  const auto* act = reinterpret_cast<const __nv_bfloat16*>(ws_.moe_act.data());
  // Tiles of min_rows slots and more go to the tiled GEMMs (same parameters).
  // Their down launch starts under the gate/up one's tail (programmatic
  // dependent launch) with its first weight blocks requested: the weights
  // and the tile table are known before gate/up ends, only its output is not.
  const bool tiled = ExpertsTiled(w, tile_rows);
  if (!w.awq.empty()) {
    const auto grouped = tiled ? LaunchGroupedAwqGemm : LaunchGroupedAwqGemv;
    const int32_t k_slices = tiled ? 0 : moe_awq_gemv_k_slices_;  // the GEMV's k split and CTA size only
    const int32_t cta_warps = tiled ? 0 : GroupedAwqCtaWarps(moe_awq_gemv_cta_warps_, moe_awq_gemv_k_slices_, tokens);
    // The shared experts' tiles (the pseudo-experts after the routed ones).
    const int32_t known_tiles =
        !tiled && moe_early_shared_experts_ > 0 && early.tile0 >= 0 ? max_tiles - early.tile0 : 0;
    const AwqExpertsView gate_up = w.awq.gate_up();
    // What the down launch's known tiles wait for: every gate/up row tile of theirs.
    const uint32_t ready_target = static_cast<uint32_t>(known_tiles) * static_cast<uint32_t>((gate_up.n + 15) / 16);
    const bool count_in = known_tiles > 0 && early.x != nullptr && early.count_in;
    // A folded routing (one token: a tile a choice, the GEMV, no known tiles)
    // leaves the tile table and slot rows unwritten; each CTA chooses itself.
    const MoeRouterRecords route = folded != nullptr ? *folded : MoeRouterRecords{};
    ERNIE_CUDA_RETURN_IF_ERROR(grouped({.x = h,
                                                     .x_row = folded != nullptr ? nullptr : ws_.moe_slot_token.data(),
                                                     .w = gate_up,
                                                     .tile_expert = ws_.moe_tile_expert.data(),
                                                     .num_tiles = ws_.moe_num_tiles.data(),
                                                     .y = ws_.moe_act.data(),
                                                     .max_tiles = max_tiles,
                                                     .tile_rows = tile_rows,
                                                     .epilogue = GroupedEpilogue::kSiluMulBf16,
                                                     .expected_tiles = expected_tiles,
                                                     .wait_first = !tiled,
                                                     .k_slices = k_slices,
                                                     .cta_warps = cta_warps,
                                                     .lean = moe_awq_gemv_lean_,
                                                     .known_tile0 = std::max(early.tile0, 0),
                                                     .known_tiles = known_tiles,
                                                     .known_expert0 = static_cast<int32_t>(config_.moe.num_experts),
                                                     .known_x = known_tiles > 0 ? early.x : nullptr,
                                                     .known_norm_weight = lw.post_attn_norm.data(),
                                                     .known_eps = config_.rms_norm_eps,
                                                     .known_done = count_in ? ws_.moe_shared_ready.data() : nullptr,
                                                     .route = route,
                                                     .prefetch_shared = moe_fold_prefetch_shared_},
                                                    s),
                               absl::StrCat("MoE AWQ experts' gate/up kernel, layer ", layer));
    return CudaStatus(grouped({.x = act,
                                            .slot_token = folded != nullptr ? nullptr : ws_.moe_slot_token.data(),
                                            .w = w.awq.down(),
                                            .tile_expert = ws_.moe_tile_expert.data(),
                                            .num_tiles = ws_.moe_num_tiles.data(),
                                            .y = ws_.moe_expert_out.data(),
                                            .max_tiles = max_tiles,
                                            .tile_rows = tile_rows,
                                            .epilogue = GroupedEpilogue::kStoreF32,
                                            .expected_tiles = expected_tiles,
                                            .dependent = true,
                                            .k_slices = k_slices,
                                            .cta_warps = cta_warps,
                                            .lean = moe_awq_gemv_lean_,
                                            .known_tile0 = std::max(early.tile0, 0),
                                            .known_tiles = count_in ? known_tiles : 0,
                                            .known_expert0 = static_cast<int32_t>(config_.moe.num_experts),
                                            .known_ready = count_in ? ws_.moe_shared_ready.data() : nullptr,
                                            .known_ready_target = ready_target,
                                            .route = route,
                                            .prefetch_slice = moe_fold_prefetch_down_},
                                           s),
                      absl::StrCat("MoE AWQ experts' down kernel, layer ", layer));
  }
  const auto grouped = tiled ? LaunchGroupedExpertGemm : LaunchGroupedExpertGemv;
  ERNIE_CUDA_RETURN_IF_ERROR(grouped({.x = h,
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
  return CudaStatus(grouped({.x = act,
                                             .w = reinterpret_cast<const __nv_bfloat16*>(w.experts_down.data()),
                                             .tile_expert = ws_.moe_tile_expert.data(),
                                             .num_tiles = ws_.moe_num_tiles.data(),
                                             .y = ws_.moe_expert_out.data(),
                                             .max_tiles = max_tiles,
                                             .tile_rows = tile_rows,
                                             .n = hidden,
                                             .k = width,
                                             .epilogue = GroupedEpilogue::kStoreF32,
                                             .expected_tiles = expected_tiles,
                                             .dependent = tiled},
                                            s),
                    absl::StrCat("MoE experts' down kernel, layer ", layer));
}

absl::Status CudaBackendImpl::MoeBlock(int64_t layer, int32_t tokens, uint16_t* h, bool normalize_into_h, float* out,
                                       bool accumulate, const MoeRouterRecords* folded) {
  const DeviceLayerWeights& lw = weights_.layers[static_cast<size_t>(layer)];
  const ModelConfig& c = config_;
  const MoeConfig& m = c.moe;
  const DeviceMoeWeights& w = lw.moe;
  cudaStream_t s = stream_.get();
  const auto hidden = static_cast<int32_t>(c.hidden_size);
  const auto experts = static_cast<int32_t>(m.num_experts), top_k = static_cast<int32_t>(m.top_k);
  for (int32_t begin = 0; begin < tokens; begin += moe_chunk_tokens_) {
    const int32_t n = std::min(moe_chunk_tokens_, tokens - begin);
    // Shared experts ride in the routed launches as pseudo-experts, except in
    // large chunks with bf16 weights, where a dense MLP reads them once.
    const bool shared_by_gemm =
        m.num_shared_experts > 0 && w.experts_gate_up.size() > 0 && n >= moe_shared_gemm_min_tokens_;
    const auto shared = static_cast<int32_t>(shared_by_gemm ? 0 : m.num_shared_experts);
    const int32_t choices = top_k + shared, stacked = experts + shared;
    uint16_t* hc = h + int64_t{begin} * hidden;
    const auto* hc_bf16 = reinterpret_cast<const __nv_bfloat16*>(hc);
    float* oc = out + int64_t{begin} * hidden;
    const int32_t assignments = n * choices;
    const int32_t tile_rows = TileRowsFor(assignments, stacked, moe_max_tile_rows_);
    // One token's choices are distinct, one tile each in expert order: the
    // shared experts (ids experts ..) take the tiles after its top_k. Their
    // int4 GEMV CTAs may compute during the routing (moe_early_shared_experts 2
    // and 3), from the residual the routing reads, once the routing has it.
    // (Not with a folded routing: no routing launch to work beside.)
    const int32_t known_shared_tile0 = n == 1 && shared > 0 && folded == nullptr ? top_k : -1;
    // (Only where the gate/up launch stages x: its other CTA shape waits all the same.)
    const bool shared_during_routing =
        known_shared_tile0 >= 0 && moe_early_shared_experts_ >= 2 && !w.awq.empty() && !ExpertsTiled(w, tile_rows) &&
        GroupedAwqGemvStagesX(tile_rows, hidden, w.awq.group_size);
    // A folded routing (`folded`: one token) has no routing launch: the
    // experts' launches and the combine choose from the o_proj's records.
    if (folded == nullptr) {
      ERNIE_CUDA_RETURN_IF_ERROR(
          LaunchMoeRouteAndAlign({.x = ws_.x.data() + int64_t{begin} * hidden,
                                  .norm_weight = lw.post_attn_norm.data(),
                                  .eps = c.rms_norm_eps,
                                  .router = w.router.data(),
                                  .correction_bias = w.correction_bias.data(),
                                  .logits = ws_.moe_logits.data(),
                                  .normed = normalize_into_h ? reinterpret_cast<__nv_bfloat16*>(hc) : nullptr,
                                  .topk_ids = ws_.moe_topk_ids.data(),
                                  .topk_weights = ws_.moe_topk_weights.data(),
                                  .tokens = n,
                                  .hidden = hidden,
                                  .experts = experts,
                                  .top_k = top_k,
                                  .shared_experts = shared,
                                  .norm_min = m.norm_min,
                                  .trigger_after_wait = shared_during_routing},
                                 {.topk_ids = ws_.moe_topk_ids.data(),
                                  .assignments = assignments,
                                  .top_k = choices,
                                  .experts = stacked,
                                  .tile_rows = tile_rows,
                                  .slot_token = ws_.moe_slot_token.data(),
                                  .slot_of = ws_.moe_slot_of.data(),
                                  .tile_expert = ws_.moe_tile_expert.data(),
                                  .num_tiles = ws_.moe_num_tiles.data(),
                                  .arrivals = ws_.moe_route_arrivals.data()},
                                 s, moe_route_cluster_),
          absl::StrCat("MoE routing kernels, layer ", layer));
    }
    // Tiles the alignment can fill: each used expert's ceil(count / tile_rows), at most
    // (assignments + used (tile_rows - 1)) / tile_rows with used <= min(experts, assignments).
    // The grouped kernels' grids span it (CTAs past the device's count exit at once): bounded by
    // every stacked expert instead, batch 1's 8 tiles had 58 rows of CTAs (ncu, v15: 1,392 CTAs
    // for 192 working ones).
    const auto max_tiles = static_cast<int32_t>(
        MoeSlotCapacity(assignments, std::min<int64_t>(stacked, assignments), tile_rows) / tile_rows);
    // Every expert chosen at least once is a tile; more when one has over tile_rows tokens.
    const int32_t expected_tiles =
        std::min(max_tiles, std::max(std::min(stacked, assignments), (assignments + tile_rows - 1) / tile_rows));
    const EarlySharedExperts early = {
        .tile0 = known_shared_tile0,
        .x = shared_during_routing ? ws_.x.data() + int64_t{begin} * hidden : nullptr,
        .count_in = shared_during_routing && moe_early_shared_experts_ == 3};
    ERNIE_RETURN_IF_ERROR(GroupedExperts(layer, hc_bf16, n, max_tiles, tile_rows, expected_tiles, early, folded));
    ERNIE_CUDA_RETURN_IF_ERROR(LaunchMoeCombine({.expert_out = ws_.moe_expert_out.data(),
                                                 .slot_of = ws_.moe_slot_of.data(),
                                                 .topk_weights = ws_.moe_topk_weights.data(),
                                                 .out = oc,
                                                 .accumulate = accumulate,
                                                 .tokens = n,
                                                 .hidden = hidden,
                                                 .top_k = choices,
                                                 // The flag the folded gate/up launch raised, or the early shared
                                                 // experts' count: zeroed for the next layer.
                                                 .reset = folded != nullptr ? folded->tiles_ready
                                                          : early.count_in  ? ws_.moe_shared_ready.data()
                                                                            : nullptr,
                                                 .route = folded != nullptr ? *folded : MoeRouterRecords{}},
                                                s),
                               absl::StrCat("MoE combine kernel, layer ", layer));
    if (shared_by_gemm) ERNIE_RETURN_IF_ERROR(SharedExpertsByGemm(layer, hc_bf16, n, oc));
  }
  return absl::OkStatus();
}

}  // namespace ernie::cuda

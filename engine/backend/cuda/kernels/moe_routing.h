// The routing half of a mixture-of-experts layer on the GPU, around
// grouped_expert_gemv.h's expert linears:
//   route:   router logits in float32 (for large steps each warp one
//            expert, each CTA 8 tokens staged normalised in shared memory,
//            so the float32 router is read once per 8 tokens; for small
//            steps each warp a quarter of one expert's dot, 32 CTAs for 64
//            experts, every load issued up front),
//            then per token (a warp each) softmax, the top_k experts
//            by probability + e_score_correction_bias (ties to the smaller
//            id), weighted by the unbiased probabilities renormalised by
//            their sum (clamped at norm_min): cpu/moe_block.cc's RouteTokens;
//   align:   the (token, choice) assignments grouped by expert into slots,
//            each expert's run padded to whole tiles of tile_rows, with the
//            expert of every tile (vLLM calls this moe_align_block_size);
//   combine: out[t] (+)= sum_j weight[t, j] * expert_out[slot of (t, j)].
// None needs the host to know the routing, so a step stays graph-capturable.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace ernie::cuda {

constexpr int32_t kMoeMaxExperts = 1024;
constexpr int32_t kMoeMaxTopK = 32;
constexpr int32_t kMoeMaxTileRows = 64;  // the largest tile of grouped_expert_gemv.h

// The router reads the MLP's input from the float32 residual stream and
// normalises it itself (RMSNorm with norm_weight), in float32 as the CPU
// reference does: routing on the bf16-rounded normed input would flip more
// near-tied experts than the model's float32 router need.
//
// Shared experts ride along as pseudo-experts: ids experts .. experts +
// shared_experts - 1, weight 1, appended to every token's choices, so the
// grouped expert launches compute them too (a SiLU-gated MLP of width
// S x I is the sum of S MLPs of width I over its column blocks).
struct MoeRouteParams {
  const float* x = nullptr;                // [tokens, hidden] residual stream at the MLP's input
  const float* norm_weight = nullptr;      // [hidden] post_attention_layernorm
  float eps = 1e-5f;
  const float* router = nullptr;           // [experts, hidden] float32, 16-byte aligned
  const float* correction_bias = nullptr;  // [experts]
  float* logits = nullptr;                 // [tokens, experts] scratch
  // [tokens, hidden] bf16 RMSNorm(x) for the experts, written on the way
  // (the router normalises x anyway), or nullptr: the decode path saves its
  // separate norm kernel so.
  __nv_bfloat16* normed = nullptr;
  int32_t* topk_ids = nullptr;             // [tokens, top_k + shared_experts] out
  float* topk_weights = nullptr;           // [tokens, top_k + shared_experts] out
  int32_t tokens = 0;
  int32_t hidden = 0;  // a multiple of 4
  int32_t experts = 0;  // 1 .. kMoeMaxExperts (routed)
  int32_t top_k = 0;    // 1 .. experts; top_k + shared_experts <= kMoeMaxTopK
  int32_t shared_experts = 0;
  float norm_min = 1e-12f;
  // LaunchMoeRouteAndAlign's small steps: let the kernel after start only
  // once this one has waited for its own prerequisite (so x is complete when
  // the next kernel starts), not at once. For a next kernel with CTAs that
  // read x without waiting (GroupedAwqGemvParams::known_x).
  bool trigger_after_wait = false;
};
cudaError_t LaunchMoeRoute(const MoeRouteParams& p, cudaStream_t stream);

// Slots the alignment may use: every assignment plus each expert's padding.
inline int64_t MoeSlotCapacity(int64_t assignments, int64_t experts, int64_t tile_rows) {
  return assignments + experts * (tile_rows - 1);
}

struct MoeAlignParams {
  const int32_t* topk_ids = nullptr;  // [assignments] from the route kernel
  int32_t assignments = 0;            // tokens x choices
  int32_t top_k = 0;                  // choices per token (routed + shared)
  int32_t experts = 0;                // routed + shared
  int32_t tile_rows = 8;              // 8, 16, 32 or 64
  int32_t* slot_token = nullptr;   // [MoeSlotCapacity] token of each used slot, -1 for padding
  int32_t* slot_of = nullptr;      // [assignments] slot of each assignment
  int32_t* tile_expert = nullptr;  // [MoeSlotCapacity / tile_rows] expert of each used tile
  int32_t* num_tiles = nullptr;    // [1] tiles used
  // [1] LaunchMoeRouteAndAlign's small steps only: the count of CTAs that
  // finished their logits. Zero before the first launch; each launch leaves
  // it zero again (so a captured graph can replay it).
  uint32_t* arrivals = nullptr;
};
cudaError_t LaunchMoeAlign(const MoeAlignParams& p, cudaStream_t stream);

// LaunchMoeRoute then LaunchMoeAlign (align.topk_ids must be route.topk_ids,
// align.top_k route.top_k + route.shared_experts, align.experts
// route.experts + route.shared_experts). Steps of at most
// kMoeFusedTopKMaxTokens tokens take one launch: the last CTA to finish its
// router logits runs the top-k and the alignment (align.arrivals needed).
// one_token_cluster: a step of one token with at most 64 routed experts runs
// as one thread-block cluster of 16 CTAs instead, whose logits meet in one
// CTA's shared memory (where the device runs such a cluster; else as above).
// Same choices, weights and tiles as the separate launches, bit for bit.
constexpr int32_t kMoeFusedTopKMaxTokens = 64;
cudaError_t LaunchMoeRouteAndAlign(const MoeRouteParams& route, const MoeAlignParams& align, cudaStream_t stream,
                                   bool one_token_cluster = true);
// Whether this device runs the one-token cluster (else one_token_cluster
// steps take the last-CTA launch).
bool MoeOneTokenClusterRuns();

// One token's routing folded into the launches around it (a decode step of
// one sequence: CudaBackendOptions::moe_fold_routing). The int4 o_proj that
// completes the residual writes router records (awq_decode_linear.h): each
// CTA's dots of the router with its rows of the residual (the norm's weight
// folded in) and their sum of squares, summed over each thread-block cluster
// of the launch into one record. The experts' gate/up and down launches and
// the combine then each choose the token's experts from the records
// themselves (kernels/moe_router_records.cuh), so no routing launch, and no
// table written by one launch and read by the next, sits between the
// residual and the experts: v36 measured the routing launch at ~3.7 us of a
// 21B-A3B layer over none (NOTES.md). Every reader sums the records in the
// same order, so all make the same choice; the routing kernels' choice
// wherever no two biased scores lie within the rounding of their other
// summation order. Tiles are as the alignment leaves one token's: its
// distinct choices sorted by id, tile_rows slots each, the first a row.
__host__ __device__ constexpr int32_t MoeRouterRecordStride(int32_t experts) { return (experts + 4) / 4 * 4; }
constexpr int32_t kMoeRouterRecordsMaxExperts = 64;
// The o_proj's record clusters: at most 16 CTAs (8 is the portable size;
// Hopper runs 16 where the kernel allows non-portable sizes).
constexpr int32_t kMoeRouterRecordClusterPortable = 8;
constexpr int32_t kMoeRouterRecordClusterMax = 16;
struct MoeRouterRecords {
  // [count, MoeRouterRecordStride(experts)], 16-byte aligned: a record is the
  // experts' dots, then the sum of squares.
  float* records = nullptr;
  int32_t count = 0;                       // records: the o_proj launch's clusters
  const float* x = nullptr;                // [hidden] the residual row the records are of
  const float* norm_weight = nullptr;      // [hidden] post_attention_layernorm
  float eps = 1e-5f;
  const float* router = nullptr;           // [experts, hidden] float32 (the o_proj's reads)
  const float* correction_bias = nullptr;  // [experts]
  int32_t hidden = 0;
  int32_t experts = 0;                     // 1 .. kMoeRouterRecordsMaxExperts
  int32_t top_k = 0;
  int32_t shared_experts = 0;              // pseudo-experts experts .., weight 1, after the routed tiles
  float norm_min = 1e-12f;
  int32_t tile_rows = 8;                   // slots a tile
  // The o_proj launch's clusters: the largest power of two up to this
  // (1 .. kMoeRouterRecordClusterMax) that divides its CTAs, a record each
  // (CudaBackendOptions::moe_router_record_cluster).
  int32_t record_cluster = kMoeRouterRecordClusterPortable;
  // Optional: the gate/up launch's first CTA publishes each tile's expert in
  // expert_of_tile ([top_k + shared_experts]) and then sets *tiles_ready to 1
  // (a release), and the down launch's CTAs, which start only as the gate/up
  // CTAs leave the SMs, read their expert there (one L2 round trip) instead
  // of choosing again (a bounded poll; without the flag they choose). The
  // combine zeroes it (MoeCombineParams::reset). Both or neither. Why a down
  // CTA never sees the previous layer's flag: it starts only after the
  // gate/up's CTAs passed their wait, so after the o_proj completed, which
  // waited for the attention, which waited for the q|k|v, which waited for
  // the previous layer's combine (each of those kernels waits before it
  // reads its input), so that zero is written before this layer's 1.
  int32_t* expert_of_tile = nullptr;
  uint32_t* tiles_ready = nullptr;
  // Optional (tests): the gate/up launch's first CTA writes the choices here
  // as MoeRouteParams leaves them (top_k + shared_experts ids and weights).
  int32_t* topk_ids = nullptr;
  float* topk_weights = nullptr;
  bool on() const { return records != nullptr; }
};
// Host side: the records' pointers set and aligned, the sizes in range.
bool MoeRouterRecordsValid(const MoeRouterRecords& r);

struct MoeCombineParams {
  const float* expert_out = nullptr;    // [slots, hidden] the experts' down projections
  const int32_t* slot_of = nullptr;     // [tokens, top_k]
  const float* topk_weights = nullptr;  // [tokens, top_k]
  float* out = nullptr;                 // [tokens, hidden]
  bool accumulate = false;              // add to out (the residual stream) instead of overwriting it
  int32_t tokens = 0;
  int32_t hidden = 0;
  int32_t top_k = 0;
  // Zeroed once the experts' launches are done (GroupedAwqGemvParams::known_ready's counter), or nullptr.
  uint32_t* reset = nullptr;
  // On: one token whose slots and weights are chosen from these records
  // (slot_of and topk_weights are not read); tokens 1, top_k its choices.
  MoeRouterRecords route = {};
};
cudaError_t LaunchMoeCombine(const MoeCombineParams& p, cudaStream_t stream);

// The shared experts of large chunks run as one dense MLP on cuBLAS
// (cuda_moe_forward.cc SharedExpertsByGemm): act[r, f] = silu(g) * u for the
// interleaved gate|up rows of device_weights.h (g = gate_up[r, 16 (f / 8) +
// f % 8], u = 8 columns on), r < rows.
struct MoeSiluMulParams {
  const float* gate_up = nullptr;  // [rows, 2 width]
  __nv_bfloat16* act = nullptr;    // [rows, width]
  int32_t rows = 0;
  int32_t width = 0;               // a multiple of 8
};
cudaError_t LaunchMoeSiluMul(const MoeSiluMulParams& p, cudaStream_t stream);

}  // namespace ernie::cuda

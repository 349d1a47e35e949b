// Routing, alignment and combine kernels of a MoE layer (see moe_routing.h).
#include <cfloat>
#include <climits>

#include <algorithm>

#include "engine/backend/cuda/kernels/cluster_sync.cuh"
#include "engine/backend/cuda/kernels/common.cuh"
#include "engine/backend/cuda/kernels/moe_one_token_topk.cuh"
#include "engine/backend/cuda/kernels/moe_routing.h"
#include "engine/backend/cuda/kernels/moe_router_records.cuh"
#include "engine/backend/cuda/kernels/tma.cuh"  // ClusterSharedAddress

namespace ernie::cuda {

namespace {

constexpr int kWarps = 8;

constexpr int kStagedFloats = 4096;  // normalised inputs staged per pass (16 KB)

// Large steps (more than kMoeFusedTopKMaxTokens tokens): logits[t, e] =
// RMSNorm(x[t]) . router[e], float32. Warp w of CTA (x, y) takes expert
// 8x + w and tokens 8y .. 8y + 7, whose normalised inputs are staged in
// shared memory kChunk values at a time, so the router is read once per 8
// tokens; lanes stride along hidden in float4s.
__global__ void __launch_bounds__(32 * kWarps) RouterLogitsStagedKernel(MoeRouteParams p) {
  constexpr int kTokens = 8;
  constexpr int kChunk = kStagedFloats / kTokens;
  __shared__ __align__(16) float xs[kTokens][kChunk];
  __shared__ float inv_rms[kTokens];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int expert = blockIdx.x * kWarps + warp;
  const int token0 = blockIdx.y * kTokens;
  const int tokens = min(kTokens, p.tokens - token0);
  if (warp < tokens) {  // warp w: token w's RMS
    const float* row = p.x + int64_t{token0 + warp} * p.hidden;
    float sum = 0.0f;
    for (int i = lane; i < p.hidden; i += 32) sum += row[i] * row[i];
    sum = kernels::WarpSum(sum);
    if (lane == 0) inv_rms[warp] = rsqrtf(sum / static_cast<float>(p.hidden) + p.eps);
  }
  const float* r = p.router + int64_t{min(expert, p.experts - 1)} * p.hidden;
  float acc[kTokens] = {};
  for (int base = 0; base < p.hidden; base += kChunk) {
    const int width = min(kChunk, p.hidden - base);
    __syncthreads();  // inv_rms written; the previous chunk read by every warp
    // The first column of CTAs also writes the normalised rows out in bf16
    // (the product is AddRmsNormKernel's, weight * (x * scale), reordered).
    const bool write_normed = p.normed != nullptr && blockIdx.x == 0;
    for (int idx = threadIdx.x; idx < kTokens * width; idx += blockDim.x) {
      const int t = idx / width, i = idx % width;
      const int64_t at = int64_t{token0 + t} * p.hidden + base + i;
      xs[t][i] = t < tokens ? p.x[at] * inv_rms[t] * p.norm_weight[base + i] : 0.0f;
      if (write_normed && t < tokens) p.normed[at] = __float2bfloat16(xs[t][i]);
    }
    __syncthreads();
#pragma unroll 4
    for (int i = 4 * lane; i < width; i += 128) {
      const float4 w = *reinterpret_cast<const float4*>(r + base + i);
#pragma unroll
      for (int t = 0; t < kTokens; ++t) {
        const float4 h = *reinterpret_cast<const float4*>(&xs[t][i]);
        acc[t] += w.x * h.x + w.y * h.y + w.z * h.z + w.w * h.w;
      }
    }
  }
  if (expert >= p.experts) return;
#pragma unroll
  for (int t = 0; t < kTokens; ++t) {
    const float sum = kernels::WarpSum(acc[t]);
    if (lane == 0 && t < tokens) p.logits[int64_t{token0 + t} * p.experts + expert] = sum;
  }
}

// Small steps (decode): a latency problem, not a bandwidth one (one token
// reads the 655 KB float32 router of a 64-expert, 2,560-wide layer once).
// CTA (x, y) takes experts kExpertsPerCta x + 0, 1 and tokens kTokens y ..;
// its warps split the hidden dimension into kSplits ranges, each warp one
// (expert, range), so 64 experts make 32 CTAs, not 8. Every load a lane
// needs (router, norm weight, x: kRegs float4 each) is issued before any
// arithmetic, and the RMSNorm is applied after the dot instead of before
// it (RMSNorm(x) . r = inv_rms(x) * sum_i x_i g_i r_i), so the sum of
// squares comes from the same loads and no pass waits on another.
constexpr int kExpertsPerCta = 2;
constexpr int kSplits = kWarps / kExpertsPerCta;

struct RouterPartials {
  float dot[kWarps][8];    // [warp][token of the CTA]
  float square[kSplits][8];
  float inv_rms[8];
};

template <int kTokens, int kRegs>
__device__ __forceinline__ void RouterLogitsOfCta(const MoeRouteParams& p, RouterPartials& partial) {
  static_assert(kTokens <= 8, "RouterPartials holds 8 tokens");
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int split = warp % kSplits;
  const int expert = blockIdx.x * kExpertsPerCta + warp / kSplits;
  const int token0 = blockIdx.y * kTokens;
  const int tokens = min(kTokens, p.tokens - token0);
  const int quads = p.hidden / 4, per_split = (quads + kSplits - 1) / kSplits;
  const int q_begin = split * per_split, q_end = min(quads, q_begin + per_split);
  const auto* r = reinterpret_cast<const float4*>(p.router + int64_t{min(expert, p.experts - 1)} * p.hidden);
  const auto* g = reinterpret_cast<const float4*>(p.norm_weight);
  float dot[kTokens] = {}, square[kTokens] = {};
  for (int base = q_begin; base < q_end; base += 32 * kRegs) {
    float4 rg[kRegs], gw[kRegs], xv[kTokens][kRegs];
#pragma unroll
    for (int j = 0; j < kRegs; ++j) {
      const int q = base + 32 * j + lane;
      const bool in = q < q_end;
      rg[j] = in ? __ldg(r + q) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      gw[j] = in ? __ldg(g + q) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    }
    // The weights are requested; x comes from the kernel before (a no-op
    // unless launched as its programmatic dependent, and after the first pass).
    kernels::WaitForPrerequisiteGrids();
#pragma unroll
    for (int j = 0; j < kRegs; ++j) {
      const int q = base + 32 * j + lane;
      const bool in = q < q_end;
#pragma unroll
      for (int t = 0; t < kTokens; ++t) {
        const auto* x = reinterpret_cast<const float4*>(p.x + int64_t{token0 + min(t, tokens - 1)} * p.hidden);
        xv[t][j] = in && t < tokens ? x[q] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      }
      rg[j] = make_float4(rg[j].x * gw[j].x, rg[j].y * gw[j].y, rg[j].z * gw[j].z, rg[j].w * gw[j].w);
    }
#pragma unroll
    for (int t = 0; t < kTokens; ++t)
#pragma unroll
      for (int j = 0; j < kRegs; ++j) {
        const float4 v = xv[t][j];
        dot[t] += rg[j].x * v.x + rg[j].y * v.y + rg[j].z * v.z + rg[j].w * v.w;
        square[t] += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
      }
  }
#pragma unroll
  for (int t = 0; t < kTokens; ++t) {
    const float d = kernels::WarpSum(dot[t]);
    const float s = kernels::WarpSum(square[t]);
    if (lane == 0) {
      partial.dot[warp][t] = d;
      if (warp < kSplits) partial.square[split][t] = s;  // the first expert's warps cover every range once
    }
  }
  __syncthreads();
  if (threadIdx.x < kTokens) {
    float s = 0.0f;
    for (int k = 0; k < kSplits; ++k) s += partial.square[k][threadIdx.x];
    partial.inv_rms[threadIdx.x] = rsqrtf(s / static_cast<float>(p.hidden) + p.eps);
  }
  __syncthreads();
  if (threadIdx.x < kExpertsPerCta * kTokens) {
    const int e = blockIdx.x * kExpertsPerCta + threadIdx.x / kTokens, t = threadIdx.x % kTokens;
    if (e < p.experts && t < tokens) {
      float d = 0.0f;
      for (int k = 0; k < kSplits; ++k) d += partial.dot[(threadIdx.x / kTokens) * kSplits + k][t];
      p.logits[int64_t{token0 + t} * p.experts + e] = d * partial.inv_rms[t];
    }
  }
  // The normalised rows in bf16 for the experts (weight * (x * scale), as
  // AddRmsNormKernel rounds it), each CTA of the row its share of the
  // columns: one CTA writing whole rows finished last and held up the
  // routing's last CTA by several dependent load rounds.
  if (p.normed != nullptr) {
    const int share = (p.hidden / 4 + gridDim.x - 1) / gridDim.x;  // float4s a CTA
    const int q0 = blockIdx.x * share, q1 = min(p.hidden / 4, q0 + share);
    for (int idx = threadIdx.x; idx < tokens * (q1 - q0); idx += blockDim.x) {
      const int t = idx / (q1 - q0), q = q0 + idx % (q1 - q0);
      const int64_t at = int64_t{token0 + t} * p.hidden + 4 * q;
      const float4 v = *reinterpret_cast<const float4*>(p.x + at);
      const float4 w = *reinterpret_cast<const float4*>(p.norm_weight + 4 * q);
      const float r = partial.inv_rms[t];
      auto* out = reinterpret_cast<__nv_bfloat162*>(p.normed + at);
      out[0] = __floats2bfloat162_rn(w.x * (v.x * r), w.y * (v.y * r));
      out[1] = __floats2bfloat162_rn(w.z * (v.z * r), w.w * (v.w * r));
    }
  }
}

// Small-step launch shapes: one token a CTA up to 8 tokens, then 8.
constexpr int kSmallStepRegs = 5;  // 5 float4 a lane: a 2,560-wide range of 640 in one pass
template <int kTokens>
__global__ void __launch_bounds__(32 * kWarps) RouterLogitsKernel(MoeRouteParams p) {
  __shared__ RouterPartials partial;
  RouterLogitsOfCta<kTokens, kTokens == 1 ? kSmallStepRegs : 2>(p, partial);
}

// One warp per token, on its own shared-memory copy of the token's logits
// (`probs`, experts floats) and the CTA's copy of the correction bias:
// softmax, then top_k rounds of a warp argmax of the biased score over the
// experts not yet chosen (marked by a negative probability). The logits
// are read with ld.cg: the fused kernel reads what other CTAs just wrote.
// ids_shared: also the choices' ids at [t * choices + j] in shared memory
// (for the alignment that follows in the same CTA), or nullptr.
__device__ __forceinline__ void TopKOfToken(const MoeRouteParams& p, int64_t t, float* probs, const float* bias,
                                            int32_t* ids_shared) {
  const int lane = threadIdx.x % 32;
  const float* logits = p.logits + t * p.experts;
  float max_logit = -FLT_MAX;
  for (int e = lane; e < p.experts; e += 32) {
    probs[e] = __ldcg(logits + e);
    max_logit = fmaxf(max_logit, probs[e]);
  }
  max_logit = kernels::WarpMax(max_logit);
  float sum = 0.0f;
  for (int e = lane; e < p.experts; e += 32) {
    const float v = expf(probs[e] - max_logit);
    probs[e] = v;
    sum += v;
  }
  sum = kernels::WarpSum(sum);
  for (int e = lane; e < p.experts; e += 32) probs[e] /= sum;
  __syncwarp();
  float chosen_prob = 0.0f, chosen_sum = 0.0f;  // lane j < top_k keeps choice j
  int chosen_id = 0;
  for (int j = 0; j < p.top_k; ++j) {
    float best = -FLT_MAX;
    int best_id = INT_MAX;
    for (int e = lane; e < p.experts; e += 32) {
      const float prob = probs[e];
      if (prob < 0.0f) continue;  // taken
      const float score = prob + bias[e];
      if (score > best || (score == best && e < best_id)) {
        best = score;
        best_id = e;
      }
    }
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) {
      const float other = __shfl_xor_sync(kernels::kFullMask, best, offset);
      const int other_id = __shfl_xor_sync(kernels::kFullMask, best_id, offset);
      if (other > best || (other == best && other_id < best_id)) {
        best = other;
        best_id = other_id;
      }
    }
    const float prob = probs[best_id];  // every lane reads it before lane 0 marks it
    chosen_sum += prob;
    if (lane == j) {
      chosen_prob = prob;
      chosen_id = best_id;
    }
    __syncwarp();
    if (lane == 0) probs[best_id] = -1.0f;
    __syncwarp();
  }
  const int choices = p.top_k + p.shared_experts;
  if (lane >= choices) return;
  const bool routed = lane < p.top_k;  // else a shared expert, unweighted
  const int id = routed ? chosen_id : p.experts + lane - p.top_k;
  p.topk_ids[t * choices + lane] = id;
  p.topk_weights[t * choices + lane] = routed ? chosen_prob / fmaxf(chosen_sum, p.norm_min) : 1.0f;
  if (ids_shared != nullptr) ids_shared[t * choices + lane] = id;
}

// Shared memory of the top-k: the bias, then a probs row per warp.
size_t TopKSharedBytes(const MoeRouteParams& p) { return sizeof(float) * (kWarps + 1) * p.experts; }

// The bias into the top-k's shared memory (the caller synchronises).
__device__ __forceinline__ void StageBias(const MoeRouteParams& p, float* shared) {
  for (int e = threadIdx.x; e < p.experts; e += blockDim.x) shared[e] = p.correction_bias[e];
}

// The CTA's warps take tokens warp, warp + 8, ... of [begin, end); the bias
// already in shared memory when bias_staged.
__device__ __forceinline__ void TopKOfTokens(const MoeRouteParams& p, int64_t begin, int64_t end, float* shared,
                                             bool bias_staged, int32_t* ids_shared) {
  if (!bias_staged) StageBias(p, shared);
  __syncthreads();
  float* probs = shared + (1 + threadIdx.x / 32) * p.experts;
  for (int64_t t = begin + threadIdx.x / 32; t < end; t += kWarps) TopKOfToken(p, t, probs, shared, ids_shared);
}

__global__ void __launch_bounds__(32 * kWarps) RouterTopKKernel(MoeRouteParams p) {
  extern __shared__ float topk_shared[];
  const int64_t begin = int64_t{blockIdx.x} * kWarps;
  TopKOfTokens(p, begin, min(begin + kWarps, int64_t{p.tokens}), topk_shared, false, nullptr);
}

// One CTA: counts per expert, padded offsets (a warp's scan), tiles'
// experts, then each assignment's slot (order within an expert's run is
// whatever the atomics give: every slot's result depends on its own row
// only). `shared` holds AlignSharedBytes; `ids` are the choices (p.topk_ids,
// or this CTA's shared-memory copy of them).
size_t AlignSharedBytes(const MoeAlignParams& p) { return sizeof(int32_t) * (3 * p.experts + 1); }

__device__ __forceinline__ void AlignAssignments(const MoeAlignParams& p, int32_t* shared, const int32_t* ids) {
  int32_t* count = shared;
  int32_t* fill = shared + p.experts;
  int32_t* offset = shared + 2 * p.experts;  // experts + 1
  for (int e = threadIdx.x; e < p.experts; e += blockDim.x) {
    count[e] = 0;
    fill[e] = 0;
  }
  __syncthreads();
  for (int i = threadIdx.x; i < p.assignments; i += blockDim.x) atomicAdd(&count[ids[i]], 1);
  __syncthreads();
  if (threadIdx.x < 32) {  // exclusive scan of the padded counts, 32 experts a round
    const int lane = threadIdx.x;
    int32_t carry = 0;
    for (int base = 0; base < p.experts; base += 32) {
      const int e = base + lane;
      const int32_t padded = e < p.experts ? (count[e] + p.tile_rows - 1) / p.tile_rows * p.tile_rows : 0;
      int32_t inclusive = padded;
#pragma unroll
      for (int d = 1; d < 32; d <<= 1) {
        const int32_t other = __shfl_up_sync(kernels::kFullMask, inclusive, d);
        if (lane >= d) inclusive += other;
      }
      if (e < p.experts) offset[e] = carry + inclusive - padded;
      carry += __shfl_sync(kernels::kFullMask, inclusive, 31);
    }
    if (lane == 0) {
      offset[p.experts] = carry;
      *p.num_tiles = carry / p.tile_rows;
    }
  }
  __syncthreads();
  const int32_t used = offset[p.experts];
  for (int s = threadIdx.x; s < used; s += blockDim.x) p.slot_token[s] = -1;
  for (int e = threadIdx.x; e < p.experts; e += blockDim.x)
    for (int32_t tile = offset[e] / p.tile_rows; tile < offset[e + 1] / p.tile_rows; ++tile) p.tile_expert[tile] = e;
  __syncthreads();  // the padding's -1 before the assignments' tokens
  for (int i = threadIdx.x; i < p.assignments; i += blockDim.x) {
    const int e = ids[i];
    const int32_t slot = offset[e] + atomicAdd(&fill[e], 1);
    p.slot_token[slot] = i / p.top_k;
    p.slot_of[i] = slot;
  }
}

__global__ void __launch_bounds__(1024) MoeAlignKernel(MoeAlignParams p) {
  extern __shared__ int32_t align_shared[];
  AlignAssignments(p, align_shared, p.topk_ids);
}

// Small steps' whole routing in one launch: every CTA computes its router
// logits (RouterLogitsOfCta), and the last CTA to finish (an arrival count,
// reset by that CTA for the next launch) runs the top-k of every token and
// the alignment. The fences make the other CTAs' logits visible to it.
// Every CTA stages the bias at the start (its loads overlap the logits; the
// last CTA then has it), and the last keeps the choices' ids in shared
// memory for the alignment: two fewer rounds of loads at the tail.
size_t RouteAlignSharedBytes(const MoeRouteParams& route, const MoeAlignParams& align) {
  return std::max(TopKSharedBytes(route), AlignSharedBytes(align)) + sizeof(int32_t) * align.assignments;
}

template <int kTokens>
__global__ void __launch_bounds__(32 * kWarps) MoeRouteAlignKernel(MoeRouteParams route, MoeAlignParams align,
                                                                  size_t ids_offset) {
  extern __shared__ float route_shared[];  // RouteAlignSharedBytes
  __shared__ RouterPartials partial;
  __shared__ bool last;
  auto* ids = reinterpret_cast<int32_t*>(reinterpret_cast<unsigned char*>(route_shared) + ids_offset);
  // Launched as a programmatic dependent (of the attention's output
  // projection at batch 1): the bias and router loads go out before the wait
  // for x (RouterLogitsOfCta), and the experts' gate/up launch, which waits
  // for all of this kernel before reading the tile table, may start now.
  if (!route.trigger_after_wait) kernels::AllowDependentLaunch();
  StageBias(route, route_shared);
  RouterLogitsOfCta<kTokens, kTokens == 1 ? kSmallStepRegs : 2>(route, partial);
  if (route.trigger_after_wait) {
    kernels::WaitForPrerequisiteGrids();  // (returns at once: RouterLogitsOfCta waited)
    kernels::AllowDependentLaunch();
  }
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) last = atomicAdd(align.arrivals, 1u) == gridDim.x * gridDim.y - 1;
  __syncthreads();
  if (!last) return;
  __threadfence();
  if (threadIdx.x == 0) *align.arrivals = 0;
  TopKOfTokens(route, 0, route.tokens, route_shared, true, ids);
  __syncthreads();  // the choices before the alignment reads them
  AlignAssignments(align, reinterpret_cast<int32_t*>(route_shared), ids);
}

// One token's routing and alignment (the decode step at batch 1) in one
// cluster of kOneTokenCtas CTAs, without MoeRouteAlignKernel's last-CTA
// handoff: there every CTA stores its logits, fences, counts itself in
// through an L2 atomic, and the last one reads every logit back, three
// dependent rounds through L2 at the end of each MoE layer (the timeline
// gives the routing 8.2 us of every 21B-A3B AWQ layer at batch 1, NOTES.md
// v31). Here each CTA stores its logits into rank 0's shared memory and one
// cluster barrier hands them over; rank 0 then chooses (its warps rank the
// experts between two CTA barriers) and its first warp aligns. The
// arithmetic is RouterLogitsOfCta's and TopKOfToken's (each dot and sum in
// the same order), so the choices, weights and tiles are the same bit for
// bit. CTA c's warp w takes quarter w % kSplits of the hidden dimension for
// experts 4c + 2 (w / kSplits) + {0, 1}: the pair shares the loads of x and
// of the norm's weight, so 16 CTAs of 8 warps, each with as many registers
// as MoeRouteAlignKernel's, cover 64 experts and still start beside the
// kernel before.
constexpr int kOneTokenCtas = 16;  // a non-portable cluster size (Hopper's largest)
constexpr int kOneTokenExpertsPerCta = 2 * kWarps / kSplits;
constexpr int kOneTokenMaxExperts = kOneTokenCtas * kOneTokenExpertsPerCta;

// The one-token kernel's top-k: moe_one_token_topk.cuh, by rank 0's whole CTA.
using kernels::OneTokenTopKShared;
static_assert(kOneTokenMaxExperts == kernels::kMoeOneTokenMaxExperts, "the shared top-k's bound");

// Warp 0: lane j < choices returns choice j's id (and writes it and its
// weight out); the others return INT_MAX.
__device__ __forceinline__ int32_t OneTokenChoices(const MoeRouteParams& p, const OneTokenTopKShared& s) {
  float weight = 0.0f;
  const int32_t id = kernels::OneTokenChoiceOfLane(p.experts, p.top_k, p.shared_experts, p.norm_min, s, &weight);
  const int lane = threadIdx.x % 32;
  if (lane < p.top_k + p.shared_experts) {
    p.topk_ids[lane] = id;
    p.topk_weights[lane] = weight;
  }
  return id;
}

// AlignAssignments for one token, in one warp: its choices are distinct
// experts, one assignment each, so expert e's tile is the number of chosen
// ids below e (the padded counts' scan) and its slot that tile's first;
// the rest of each tile is padding. Lane j < choices holds choice j's id.
__device__ __forceinline__ void AlignOneToken(const MoeAlignParams& p, int32_t id) {
  const int lane = threadIdx.x % 32, choices = p.top_k;
  const int32_t tile = kernels::OneTokenTileOf(id, choices);
  if (lane < choices) {
    const int32_t slot = tile * p.tile_rows;
    p.slot_token[slot] = 0;
    p.slot_of[lane] = slot;
    p.tile_expert[tile] = id;
  }
  const int padding = p.tile_rows - 1;
  for (int i = lane; i < choices * padding; i += 32) p.slot_token[i / padding * p.tile_rows + 1 + i % padding] = -1;
  if (lane == 0) *p.num_tiles = choices;
}

__global__ void __launch_bounds__(32 * kWarps) MoeRouteAlignOneTokenKernel(MoeRouteParams route, MoeAlignParams align) {
  __shared__ float logits[kOneTokenMaxExperts];  // rank 0's receives every CTA's
  __shared__ float dots[kWarps][2];
  __shared__ float squares[kSplits];
  __shared__ float inv_rms;
  // Distributed shared memory may be written once every CTA of the cluster
  // runs: this arrival is waited for only before the stores, by when all are in.
  kernels::ClusterArrive();
  // The experts' gate/up launch waits for all of this kernel (but see trigger_after_wait).
  if (!route.trigger_after_wait) kernels::AllowDependentLaunch();
  const uint32_t rank = kernels::ClusterRank();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, split = warp % kSplits;
  float bias[2] = {0.0f, 0.0f};  // rank 0's warp 0 chooses: its lanes' experts' biases, requested now
  if (rank == 0 && warp == 0) {
#pragma unroll
    for (int i = 0; i < 2; ++i)
      if (lane + 32 * i < route.experts) bias[i] = route.correction_bias[lane + 32 * i];
  }
  const int expert0 = static_cast<int>(rank) * kOneTokenExpertsPerCta + 2 * (warp / kSplits);
  const int quads = route.hidden / 4, per_split = (quads + kSplits - 1) / kSplits;
  const int q_begin = split * per_split, q_end = min(quads, q_begin + per_split);
  const auto* r0 = reinterpret_cast<const float4*>(route.router + int64_t{min(expert0, route.experts - 1)} * route.hidden);
  const auto* r1 =
      reinterpret_cast<const float4*>(route.router + int64_t{min(expert0 + 1, route.experts - 1)} * route.hidden);
  const auto* g = reinterpret_cast<const float4*>(route.norm_weight);
  const auto* x = reinterpret_cast<const float4*>(route.x);
  const float4 zero = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  float dot0 = 0.0f, dot1 = 0.0f, square = 0.0f;
  for (int base = q_begin; base < q_end; base += 32 * kSmallStepRegs) {
    float4 ra[kSmallStepRegs], rb[kSmallStepRegs], gw[kSmallStepRegs], xv[kSmallStepRegs];
#pragma unroll
    for (int j = 0; j < kSmallStepRegs; ++j) {
      const int q = base + 32 * j + lane;
      const bool in = q < q_end;
      ra[j] = in ? __ldg(r0 + q) : zero;
      rb[j] = in ? __ldg(r1 + q) : zero;
      gw[j] = in ? __ldg(g + q) : zero;
    }
    kernels::WaitForPrerequisiteGrids();  // x is the kernel before's
#pragma unroll
    for (int j = 0; j < kSmallStepRegs; ++j) {
      const int q = base + 32 * j + lane;
      xv[j] = q < q_end ? x[q] : zero;
      ra[j] = make_float4(ra[j].x * gw[j].x, ra[j].y * gw[j].y, ra[j].z * gw[j].z, ra[j].w * gw[j].w);
      rb[j] = make_float4(rb[j].x * gw[j].x, rb[j].y * gw[j].y, rb[j].z * gw[j].z, rb[j].w * gw[j].w);
    }
#pragma unroll
    for (int j = 0; j < kSmallStepRegs; ++j) {
      const float4 v = xv[j];
      dot0 += ra[j].x * v.x + ra[j].y * v.y + ra[j].z * v.z + ra[j].w * v.w;
      dot1 += rb[j].x * v.x + rb[j].y * v.y + rb[j].z * v.z + rb[j].w * v.w;
      square += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
    }
  }
  if (route.trigger_after_wait) {
    kernels::WaitForPrerequisiteGrids();  // (at once where the loop waited)
    kernels::AllowDependentLaunch();
  }
  dot0 = kernels::WarpSum(dot0);
  dot1 = kernels::WarpSum(dot1);
  square = kernels::WarpSum(square);
  if (lane == 0) {
    dots[warp][0] = dot0;
    dots[warp][1] = dot1;
    if (warp < kSplits) squares[split] = square;  // the first pair's warps cover every range once
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    float s = 0.0f;
    for (int k = 0; k < kSplits; ++k) s += squares[k];
    inv_rms = rsqrtf(s / static_cast<float>(route.hidden) + route.eps);
  }
  __syncthreads();
  kernels::ClusterWait();  // every CTA of the cluster runs
  if (threadIdx.x < kOneTokenExpertsPerCta) {
    const int local = threadIdx.x, e = static_cast<int>(rank) * kOneTokenExpertsPerCta + local;
    if (e < route.experts) {
      float d = 0.0f;
      for (int k = 0; k < kSplits; ++k) d += dots[(local / 2) * kSplits + k][local % 2];
      const float logit = d * inv_rms;
      route.logits[e] = logit;  // as the other launches leave it (scratch)
      kernels::StoreToCluster(kernels::ClusterSharedAddress(&logits[e], 0), logit);
    }
  }
  kernels::ClusterArriveRelease();
  kernels::ClusterWait();  // every logit is in rank 0's shared memory
  if (rank != 0) {
    // The normalised row in bf16 for the experts (as RouterLogitsOfCta
    // writes it), over the other ranks while rank 0 chooses.
    if (route.normed == nullptr) return;
    const int share = (quads + kOneTokenCtas - 2) / (kOneTokenCtas - 1);
    const int q0 = (static_cast<int>(rank) - 1) * share, q1 = min(quads, q0 + share);
    for (int q = q0 + static_cast<int>(threadIdx.x); q < q1; q += blockDim.x) {
      const float4 v = x[q], w = g[q];
      auto* out = reinterpret_cast<__nv_bfloat162*>(route.normed + 4 * int64_t{q});
      out[0] = __floats2bfloat162_rn(w.x * (v.x * inv_rms), w.y * (v.y * inv_rms));
      out[1] = __floats2bfloat162_rn(w.z * (v.z * inv_rms), w.w * (v.w * inv_rms));
    }
    return;
  }
  // Rank 0 chooses (its CTA ranks the experts, OneTokenRanks) and its first warp aligns.
  __shared__ OneTokenTopKShared top;
  if (warp == 0) kernels::OneTokenSoftmax(route.experts, logits, bias, top);
  __syncthreads();
  kernels::OneTokenRanks<32 * kWarps>(route.experts, route.top_k, top);
  __syncthreads();
  if (warp != 0) return;
  AlignOneToken(align, OneTokenChoices(route, top));
}

// Grid (tokens, hidden / (4 kCombineThreads)): one float4 of the output a
// thread. Launched as a programmatic dependent of the down projection: the
// token's slots and weights (the routing kernel's, finished before the
// experts began) are read into shared memory before the wait, the experts'
// outputs after it, every choice's load issued before the sums. The
// kernels after it (the next layer's first linear) may launch as soon as it
// starts.
constexpr int kCombineThreads = 128;
// kFolded: one token chosen from MoeCombineParams::route's records before the
// wait (they are the o_proj's, complete before the experts' launches let
// this one start), instead of the routing's tables.
template <bool kFolded>
__global__ void __launch_bounds__(kCombineThreads) MoeCombineKernel(MoeCombineParams p) {
  __shared__ int64_t slot[kMoeMaxTopK];
  __shared__ float weight[kMoeMaxTopK];
  kernels::AllowDependentLaunch();
  const int64_t t = blockIdx.x;
  if constexpr (kFolded) {
    __shared__ kernels::OneTokenChoice choice;
    kernels::ChooseFromRouterRecords(p.route, choice);
    if (threadIdx.x < p.top_k) {
      slot[threadIdx.x] = int64_t{choice.tile_of_choice[threadIdx.x]} * p.route.tile_rows;
      weight[threadIdx.x] = choice.weight_of_choice[threadIdx.x];
    }
  } else if (threadIdx.x < p.top_k) {
    slot[threadIdx.x] = p.slot_of[t * p.top_k + threadIdx.x];
    weight[threadIdx.x] = p.topk_weights[t * p.top_k + threadIdx.x];
  }
  __syncthreads();
  kernels::WaitForPrerequisiteGrids();
  if (p.reset != nullptr && blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x == 0) *p.reset = 0;
  const int q = blockIdx.y * kCombineThreads + threadIdx.x;
  if (4 * q >= p.hidden) return;
  float4 sum = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll 8
  for (int j = 0; j < p.top_k; ++j) {
    const float4 e = *reinterpret_cast<const float4*>(p.expert_out + slot[j] * p.hidden + 4 * q);
    const float w = weight[j];
    sum.x += w * e.x, sum.y += w * e.y, sum.z += w * e.z, sum.w += w * e.w;
  }
  auto* out = reinterpret_cast<float4*>(p.out + t * p.hidden) + q;
  if (p.accumulate) {
    const float4 r = *out;
    sum = make_float4(r.x + sum.x, r.y + sum.y, r.z + sum.z, r.w + sum.w);
  }
  *out = sum;
}

// One CTA a row.
__global__ void MoeSiluMulKernel(MoeSiluMulParams p) {
  const int64_t s = blockIdx.x;
  const float* row = p.gate_up + s * 2 * p.width;
  for (int f = threadIdx.x; f < p.width; f += blockDim.x) {
    const float g = row[(f / 8) * 16 + f % 8], u = row[(f / 8) * 16 + f % 8 + 8];
    p.act[s * p.width + f] = __float2bfloat16(kernels::Silu(g) * u);
  }
}

bool ValidRoute(const MoeRouteParams& p) {
  if (p.x == nullptr || p.norm_weight == nullptr || p.router == nullptr || p.correction_bias == nullptr ||
      p.logits == nullptr || p.topk_ids == nullptr || p.topk_weights == nullptr ||
      reinterpret_cast<uintptr_t>(p.router) % 16 != 0 || reinterpret_cast<uintptr_t>(p.x) % 16 != 0 ||
      reinterpret_cast<uintptr_t>(p.norm_weight) % 16 != 0 || reinterpret_cast<uintptr_t>(p.normed) % 8 != 0)
    return false;
  return p.tokens >= 1 && p.hidden >= 4 && p.hidden % 4 == 0 && p.experts >= 1 && p.experts <= kMoeMaxExperts &&
         p.top_k >= 1 && p.top_k <= p.experts && p.shared_experts >= 0 && p.top_k + p.shared_experts <= kMoeMaxTopK;
}

bool ValidAlign(const MoeAlignParams& p) {
  if (p.topk_ids == nullptr || p.slot_token == nullptr || p.slot_of == nullptr || p.tile_expert == nullptr ||
      p.num_tiles == nullptr)
    return false;
  return p.assignments >= 1 && p.top_k >= 1 && p.experts >= 1 && p.experts <= kMoeMaxExperts &&
         (p.tile_rows == 8 || p.tile_rows == 16 || p.tile_rows == 32 || p.tile_rows == 64);
}

unsigned ExpertCtas(const MoeRouteParams& p) { return (p.experts + kExpertsPerCta - 1) / kExpertsPerCta; }

cudaError_t LaunchRouterLogits(const MoeRouteParams& p, cudaStream_t stream) {
  if (p.tokens <= 8) {
    RouterLogitsKernel<1><<<dim3(ExpertCtas(p), p.tokens), 32 * kWarps, 0, stream>>>(p);
  } else if (p.tokens <= kMoeFusedTopKMaxTokens) {
    RouterLogitsKernel<8><<<dim3(ExpertCtas(p), (p.tokens + 7) / 8), 32 * kWarps, 0, stream>>>(p);
  } else {
    const unsigned expert_ctas = (p.experts + kWarps - 1) / kWarps;
    RouterLogitsStagedKernel<<<dim3(expert_ctas, (p.tokens + 7) / 8), 32 * kWarps, 0, stream>>>(p);
  }
  return cudaGetLastError();
}

}  // namespace

cudaError_t LaunchMoeRoute(const MoeRouteParams& p, cudaStream_t stream) {
  if (!ValidRoute(p)) return cudaErrorInvalidValue;
  if (const cudaError_t e = LaunchRouterLogits(p, stream); e != cudaSuccess) return e;
  RouterTopKKernel<<<(p.tokens + kWarps - 1) / kWarps, 32 * kWarps, TopKSharedBytes(p), stream>>>(p);
  return cudaGetLastError();
}

cudaError_t LaunchMoeAlign(const MoeAlignParams& p, cudaStream_t stream) {
  if (!ValidAlign(p)) return cudaErrorInvalidValue;
  MoeAlignKernel<<<1, 1024, AlignSharedBytes(p), stream>>>(p);
  return cudaGetLastError();
}

namespace {

// The one-token kernel's launch: one cluster of kOneTokenCtas CTAs, as a
// programmatic dependent (the occupancy query ignores the stream and that).
cudaLaunchConfig_t OneTokenClusterConfig(cudaStream_t stream, cudaLaunchAttribute (&attrs)[2]) {
  return kernels::DependentClusterConfig(dim3(kOneTokenCtas), dim3(32 * kWarps), 0, stream, kOneTokenCtas, attrs);
}

// Whether this device runs MoeRouteAlignOneTokenKernel's cluster (a
// non-portable size: Hopper has it; a MIG slice or another GPU may not).
// Asked once a process.
bool OneTokenClusterRuns() {
  static const bool runs = [] {
    if (cudaFuncSetAttribute(MoeRouteAlignOneTokenKernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1) !=
        cudaSuccess) {
      (void)cudaGetLastError();
      return false;
    }
    cudaLaunchAttribute attrs[2];
    const cudaLaunchConfig_t config = OneTokenClusterConfig(nullptr, attrs);
    int clusters = 0;
    if (cudaOccupancyMaxActiveClusters(&clusters, MoeRouteAlignOneTokenKernel, &config) != cudaSuccess) {
      (void)cudaGetLastError();
      return false;
    }
    return clusters > 0;
  }();
  return runs;
}

cudaError_t LaunchOneTokenCluster(const MoeRouteParams& route, const MoeAlignParams& align, cudaStream_t stream) {
  cudaLaunchAttribute attrs[2];
  const cudaLaunchConfig_t config = OneTokenClusterConfig(stream, attrs);
  return cudaLaunchKernelEx(&config, MoeRouteAlignOneTokenKernel, route, align);
}

}  // namespace

bool MoeOneTokenClusterRuns() { return OneTokenClusterRuns(); }

cudaError_t LaunchMoeRouteAndAlign(const MoeRouteParams& route, const MoeAlignParams& align, cudaStream_t stream,
                                   bool one_token_cluster) {
  if (!ValidRoute(route) || !ValidAlign(align) || align.topk_ids != route.topk_ids ||
      align.top_k != route.top_k + route.shared_experts || align.assignments != route.tokens * align.top_k ||
      align.experts != route.experts + route.shared_experts)
    return cudaErrorInvalidValue;
  if (route.tokens > kMoeFusedTopKMaxTokens) {
    if (const cudaError_t e = LaunchMoeRoute(route, stream); e != cudaSuccess) return e;
    return LaunchMoeAlign(align, stream);
  }
  if (align.arrivals == nullptr) return cudaErrorInvalidValue;
  if (one_token_cluster && route.tokens == 1 && route.experts <= kOneTokenMaxExperts && OneTokenClusterRuns())
    return LaunchOneTokenCluster(route, align, stream);
  const size_t shared = RouteAlignSharedBytes(route, align);
  const size_t ids_offset = std::max(TopKSharedBytes(route), AlignSharedBytes(align));
  if (route.tokens <= 8)
    return kernels::LaunchDependent(MoeRouteAlignKernel<1>, dim3(ExpertCtas(route), route.tokens), dim3(32 * kWarps),
                                    shared, stream, route, align, ids_offset);
  return kernels::LaunchDependent(MoeRouteAlignKernel<8>, dim3(ExpertCtas(route), (route.tokens + 7) / 8),
                                  dim3(32 * kWarps), shared, stream, route, align, ids_offset);
}

bool MoeRouterRecordsValid(const MoeRouterRecords& r) {
  if (r.records == nullptr || r.x == nullptr || r.norm_weight == nullptr || r.router == nullptr ||
      r.correction_bias == nullptr || (r.expert_of_tile == nullptr) != (r.tiles_ready == nullptr) ||
      !kernels::AlignedTo(r.records, 16) || !kernels::AlignedTo(r.x, 16))
    return false;
  return r.count >= 1 && r.hidden >= 4 && r.hidden % 4 == 0 && r.experts >= 1 &&
         r.experts <= kMoeRouterRecordsMaxExperts && r.top_k >= 1 && r.top_k <= r.experts && r.shared_experts >= 0 &&
         r.top_k + r.shared_experts <= kMoeMaxTopK && r.record_cluster >= 1 &&
         r.record_cluster <= kMoeRouterRecordClusterMax &&
         (r.tile_rows == 8 || r.tile_rows == 16 || r.tile_rows == 32 || r.tile_rows == 64);
}

cudaError_t LaunchMoeCombine(const MoeCombineParams& p, cudaStream_t stream) {
  const bool folded = p.route.on();
  if (p.expert_out == nullptr || (!folded && (p.slot_of == nullptr || p.topk_weights == nullptr)) ||
      p.out == nullptr || p.tokens < 1 || p.hidden < 4 || p.hidden % 4 != 0 || p.top_k < 1 ||
      p.top_k > kMoeMaxTopK || reinterpret_cast<uintptr_t>(p.expert_out) % 16 != 0 ||
      reinterpret_cast<uintptr_t>(p.out) % 16 != 0)
    return cudaErrorInvalidValue;
  if (folded && (!MoeRouterRecordsValid(p.route) || p.tokens != 1 ||
                 p.top_k != p.route.top_k + p.route.shared_experts || p.route.hidden != p.hidden))
    return cudaErrorInvalidValue;
  const int quads = p.hidden / 4;
  const dim3 grid(static_cast<unsigned>(p.tokens), static_cast<unsigned>((quads + kCombineThreads - 1) / kCombineThreads));
  return kernels::LaunchDependent(folded ? MoeCombineKernel<true> : MoeCombineKernel<false>, grid,
                                  dim3(kCombineThreads), 0, stream, p);
}

cudaError_t LaunchMoeSiluMul(const MoeSiluMulParams& p, cudaStream_t stream) {
  if (p.gate_up == nullptr || p.act == nullptr || p.rows < 1 || p.width < 8 || p.width % 8 != 0)
    return cudaErrorInvalidValue;
  MoeSiluMulKernel<<<p.rows, 256, 0, stream>>>(p);
  return cudaGetLastError();
}

}  // namespace ernie::cuda

// Routing, alignment and combine kernels of a MoE layer (see moe_routing.h).
#include <cfloat>
#include <climits>

#include "engine/backend/cuda/kernels/common.cuh"
#include "engine/backend/cuda/kernels/moe_routing.h"

namespace ernie::cuda {

namespace {

constexpr int kWarps = 8;

constexpr int kStagedFloats = 4096;  // normalised inputs staged per pass (16 KB)

// logits[t, e] = RMSNorm(x[t]) . router[e], float32. Warp w of CTA (x, y)
// takes expert 8x + w and tokens kTokens y .. kTokens y + kTokens - 1,
// whose normalised inputs are staged in shared memory kChunk values at a
// time; lanes stride along hidden in float4s. One token a CTA for decode
// (the whole hidden in one pass: no CTA waits on another's stage), 8 for
// larger steps (the router read once per 8 tokens).
template <int kTokens>
__global__ void __launch_bounds__(32 * kWarps) RouterLogitsKernel(MoeRouteParams p) {
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

// One warp per token: softmax over the experts (in place in `logits`), then
// top_k rounds of a warp argmax of the biased score over the experts not
// yet chosen; chosen ones are marked by a negative probability.
__device__ __forceinline__ void TopKOfToken(const MoeRouteParams& p, int64_t t) {
  const int lane = threadIdx.x % 32;
  float* probs = p.logits + t * p.experts;
  float max_logit = -FLT_MAX;
  for (int e = lane; e < p.experts; e += 32) max_logit = fmaxf(max_logit, probs[e]);
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
      const float score = prob + p.correction_bias[e];
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
  if (lane < p.top_k) {
    p.topk_ids[t * choices + lane] = chosen_id;
    p.topk_weights[t * choices + lane] = chosen_prob / fmaxf(chosen_sum, p.norm_min);
  } else if (lane < choices) {  // the shared experts, unweighted
    p.topk_ids[t * choices + lane] = p.experts + lane - p.top_k;
    p.topk_weights[t * choices + lane] = 1.0f;
  }
}

__global__ void __launch_bounds__(32 * kWarps) RouterTopKKernel(MoeRouteParams p) {
  const int64_t t = int64_t{blockIdx.x} * kWarps + threadIdx.x / 32;
  if (t < p.tokens) TopKOfToken(p, t);
}

// One CTA: counts per expert, padded offsets, tiles' experts, then each
// assignment's slot (order within an expert's run is whatever the atomics
// give: every slot's result depends on its own row only).
struct AlignShared {
  int32_t count[kMoeMaxExperts], offset[kMoeMaxExperts + 1], fill[kMoeMaxExperts];
};

__device__ __forceinline__ void AlignAssignments(const MoeAlignParams& p, AlignShared& shared) {
  int32_t* count = shared.count;
  int32_t* offset = shared.offset;
  int32_t* fill = shared.fill;
  for (int e = threadIdx.x; e < p.experts; e += blockDim.x) {
    count[e] = 0;
    fill[e] = 0;
  }
  __syncthreads();
  for (int i = threadIdx.x; i < p.assignments; i += blockDim.x) atomicAdd(&count[p.topk_ids[i]], 1);
  __syncthreads();
  if (threadIdx.x == 0) {
    int32_t at = 0;
    for (int e = 0; e < p.experts; ++e) {
      offset[e] = at;
      at += (count[e] + p.tile_rows - 1) / p.tile_rows * p.tile_rows;
    }
    offset[p.experts] = at;
    *p.num_tiles = at / p.tile_rows;
  }
  __syncthreads();
  const int32_t used = offset[p.experts];
  for (int s = threadIdx.x; s < used; s += blockDim.x) p.slot_token[s] = -1;
  for (int e = threadIdx.x; e < p.experts; e += blockDim.x)
    for (int32_t tile = offset[e] / p.tile_rows; tile < offset[e + 1] / p.tile_rows; ++tile) p.tile_expert[tile] = e;
  __syncthreads();  // the padding's -1 before the assignments' tokens
  for (int i = threadIdx.x; i < p.assignments; i += blockDim.x) {
    const int e = p.topk_ids[i];
    const int32_t slot = offset[e] + atomicAdd(&fill[e], 1);
    p.slot_token[slot] = i / p.top_k;
    p.slot_of[i] = slot;
  }
}

__global__ void __launch_bounds__(1024) MoeAlignKernel(MoeAlignParams p) {
  __shared__ AlignShared shared;
  AlignAssignments(p, shared);
}

// One CTA of 1024 threads: warp w takes the top-k of tokens w, w + 32, ...;
// the barrier makes their choices (global writes of this CTA) visible to
// the alignment that follows.
__global__ void __launch_bounds__(1024) MoeTopKAlignKernel(MoeRouteParams route, MoeAlignParams align) {
  __shared__ AlignShared shared;
  for (int64_t t = threadIdx.x / 32; t < route.tokens; t += blockDim.x / 32) TopKOfToken(route, t);
  __syncthreads();
  AlignAssignments(align, shared);
}

// Grid (tokens, hidden / kCombineThreads): one output element a thread.
constexpr int kCombineThreads = 256;
__global__ void __launch_bounds__(kCombineThreads) MoeCombineKernel(MoeCombineParams p) {
  const int64_t t = blockIdx.x;
  const int i = blockIdx.y * kCombineThreads + threadIdx.x;
  if (i >= p.hidden) return;
  float sum = 0.0f;
  for (int j = 0; j < p.top_k; ++j) {
    const int64_t slot = p.slot_of[t * p.top_k + j];
    sum += p.topk_weights[t * p.top_k + j] * p.expert_out[slot * p.hidden + i];
  }
  float* out = p.out + t * p.hidden + i;
  *out = p.accumulate ? *out + sum : sum;
}

// One CTA a slot; slots past the used ones return.
__global__ void MoeGatherKernel(MoeGatherParams p) {
  const int64_t s = blockIdx.x;
  if (s >= int64_t{*p.num_tiles} * p.tile_rows) return;
  const int32_t token = p.slot_token[s];
  const auto* src = reinterpret_cast<const uint4*>(p.x + int64_t{token} * p.hidden);
  auto* dst = reinterpret_cast<uint4*>(p.out + s * p.hidden);
  for (int i = threadIdx.x; i < p.hidden / 8; i += blockDim.x) dst[i] = token >= 0 ? src[i] : make_uint4(0, 0, 0, 0);
}

__global__ void MoeSiluMulKernel(MoeSiluMulParams p) {
  const int64_t s = blockIdx.x;
  if (p.num_tiles != nullptr && s >= int64_t{*p.num_tiles} * p.tile_rows) return;
  const float* row = p.gate_up + s * 2 * p.width;
  for (int f = threadIdx.x; f < p.width; f += blockDim.x) {
    const float g = row[(f / 8) * 16 + f % 8], u = row[(f / 8) * 16 + f % 8 + 8];
    p.act[s * p.width + f] = __float2bfloat16(g / (1.0f + expf(-g)) * u);
  }
}

bool ValidRoute(const MoeRouteParams& p) {
  if (p.x == nullptr || p.norm_weight == nullptr || p.router == nullptr || p.correction_bias == nullptr ||
      p.logits == nullptr || p.topk_ids == nullptr || p.topk_weights == nullptr ||
      reinterpret_cast<uintptr_t>(p.router) % 16 != 0)
    return cudaErrorInvalidValue;
  if (p.tokens < 1 || p.hidden < 4 || p.hidden % 4 != 0 || p.experts < 1 || p.experts > kMoeMaxExperts ||
      p.top_k < 1 || p.top_k > p.experts || p.shared_experts < 0 || p.top_k + p.shared_experts > kMoeMaxTopK)
    return false;
  return true;
}

bool ValidAlign(const MoeAlignParams& p) {
  if (p.topk_ids == nullptr || p.slot_token == nullptr || p.slot_of == nullptr || p.tile_expert == nullptr ||
      p.num_tiles == nullptr)
    return false;
  return p.assignments >= 1 && p.top_k >= 1 && p.experts >= 1 && p.experts <= kMoeMaxExperts &&
         (p.tile_rows == 8 || p.tile_rows == 16 || p.tile_rows == 32 || p.tile_rows == 64);
}

cudaError_t LaunchRouterLogits(const MoeRouteParams& p, cudaStream_t stream) {
  const unsigned expert_ctas = (p.experts + kWarps - 1) / kWarps;
  if (p.tokens <= 2) {
    RouterLogitsKernel<1><<<dim3(expert_ctas, p.tokens), 32 * kWarps, 0, stream>>>(p);
  } else {
    RouterLogitsKernel<8><<<dim3(expert_ctas, (p.tokens + 7) / 8), 32 * kWarps, 0, stream>>>(p);
  }
  return cudaGetLastError();
}

}  // namespace

cudaError_t LaunchMoeRoute(const MoeRouteParams& p, cudaStream_t stream) {
  if (!ValidRoute(p)) return cudaErrorInvalidValue;
  if (const cudaError_t e = LaunchRouterLogits(p, stream); e != cudaSuccess) return e;
  RouterTopKKernel<<<(p.tokens + kWarps - 1) / kWarps, 32 * kWarps, 0, stream>>>(p);
  return cudaGetLastError();
}

cudaError_t LaunchMoeAlign(const MoeAlignParams& p, cudaStream_t stream) {
  if (!ValidAlign(p)) return cudaErrorInvalidValue;
  MoeAlignKernel<<<1, 1024, 0, stream>>>(p);
  return cudaGetLastError();
}

cudaError_t LaunchMoeRouteAndAlign(const MoeRouteParams& route, const MoeAlignParams& align, cudaStream_t stream) {
  if (!ValidRoute(route) || !ValidAlign(align) || align.topk_ids != route.topk_ids ||
      align.top_k != route.top_k + route.shared_experts || align.assignments != route.tokens * align.top_k)
    return cudaErrorInvalidValue;
  if (route.tokens > kMoeFusedTopKMaxTokens) {
    if (const cudaError_t e = LaunchMoeRoute(route, stream); e != cudaSuccess) return e;
    return LaunchMoeAlign(align, stream);
  }
  if (const cudaError_t e = LaunchRouterLogits(route, stream); e != cudaSuccess) return e;
  MoeTopKAlignKernel<<<1, 1024, 0, stream>>>(route, align);
  return cudaGetLastError();
}

cudaError_t LaunchMoeCombine(const MoeCombineParams& p, cudaStream_t stream) {
  if (p.expert_out == nullptr || p.slot_of == nullptr || p.topk_weights == nullptr || p.out == nullptr ||
      p.tokens < 1 || p.hidden < 1 || p.top_k < 1)
    return cudaErrorInvalidValue;
  const dim3 grid(static_cast<unsigned>(p.tokens), static_cast<unsigned>((p.hidden + kCombineThreads - 1) / kCombineThreads));
  MoeCombineKernel<<<grid, kCombineThreads, 0, stream>>>(p);
  return cudaGetLastError();
}

cudaError_t LaunchMoeGather(const MoeGatherParams& p, cudaStream_t stream) {
  if (p.x == nullptr || p.slot_token == nullptr || p.num_tiles == nullptr || p.out == nullptr || p.max_slots < 1 ||
      p.hidden < 8 || p.hidden % 8 != 0 || p.tile_rows < 1)
    return cudaErrorInvalidValue;
  MoeGatherKernel<<<p.max_slots, 128, 0, stream>>>(p);
  return cudaGetLastError();
}

cudaError_t LaunchMoeSiluMul(const MoeSiluMulParams& p, cudaStream_t stream) {
  if (p.gate_up == nullptr || p.act == nullptr || p.max_slots < 1 || p.width < 8 ||
      p.width % 8 != 0 || p.tile_rows < 1)
    return cudaErrorInvalidValue;
  MoeSiluMulKernel<<<p.max_slots, 256, 0, stream>>>(p);
  return cudaGetLastError();
}

}  // namespace ernie::cuda

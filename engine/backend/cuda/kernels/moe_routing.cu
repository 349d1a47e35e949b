// Routing, alignment and combine kernels of a MoE layer (see moe_routing.h).
#include <cfloat>
#include <climits>

#include "engine/backend/cuda/kernels/common.cuh"
#include "engine/backend/cuda/kernels/moe_routing.h"

namespace ernie::cuda {

namespace {

constexpr int kWarps = 8;
constexpr int kTokensPerCta = 8;

// logits[t, e] = h[t] . router[e], float32. Warp w of CTA (x, y) takes expert
// 8x + w and tokens 8y .. 8y+7; lanes stride along hidden in float4s.
__global__ void __launch_bounds__(32 * kWarps) RouterLogitsKernel(MoeRouteParams p) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int expert = blockIdx.x * kWarps + warp;
  const int token0 = blockIdx.y * kTokensPerCta;
  if (expert >= p.experts) return;
  const float* r = p.router + int64_t{expert} * p.hidden;
  float acc[kTokensPerCta] = {};
  for (int i = 4 * lane; i < p.hidden; i += 128) {
    const float4 w = *reinterpret_cast<const float4*>(r + i);
#pragma unroll
    for (int t = 0; t < kTokensPerCta; ++t) {
      if (token0 + t >= p.tokens) break;
      const __nv_bfloat16* h = p.h + int64_t{token0 + t} * p.hidden + i;
      const __nv_bfloat162 h01 = *reinterpret_cast<const __nv_bfloat162*>(h);
      const __nv_bfloat162 h23 = *reinterpret_cast<const __nv_bfloat162*>(h + 2);
      acc[t] += w.x * __low2float(h01) + w.y * __high2float(h01) + w.z * __low2float(h23) + w.w * __high2float(h23);
    }
  }
#pragma unroll
  for (int t = 0; t < kTokensPerCta; ++t) {
    const float sum = kernels::WarpSum(acc[t]);
    if (lane == 0 && token0 + t < p.tokens) p.logits[int64_t{token0 + t} * p.experts + expert] = sum;
  }
}

// One warp per token: softmax over the experts (in place in `logits`), then
// top_k rounds of a warp argmax of the biased score over the experts not
// yet chosen; chosen ones are marked by a negative probability.
__global__ void __launch_bounds__(32 * kWarps) RouterTopKKernel(MoeRouteParams p) {
  const int lane = threadIdx.x % 32;
  const int64_t t = int64_t{blockIdx.x} * kWarps + threadIdx.x / 32;
  if (t >= p.tokens) return;
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
  if (lane < p.top_k) {
    p.topk_ids[t * p.top_k + lane] = chosen_id;
    p.topk_weights[t * p.top_k + lane] = chosen_prob / fmaxf(chosen_sum, p.norm_min);
  }
}

// One CTA: counts per expert, padded offsets, tiles' experts, then each
// assignment's slot (order within an expert's run is whatever the atomics
// give: every slot's result depends on its own row only).
__global__ void __launch_bounds__(1024) MoeAlignKernel(MoeAlignParams p) {
  __shared__ int32_t count[kMoeMaxExperts], offset[kMoeMaxExperts + 1], fill[kMoeMaxExperts];
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

__global__ void MoeCombineKernel(MoeCombineParams p) {
  const int64_t t = blockIdx.x;
  float* out = p.out + t * p.hidden;
  const float* shared = p.shared != nullptr ? p.shared + t * p.hidden : nullptr;
  for (int i = threadIdx.x; i < p.hidden; i += blockDim.x) {
    float routed = 0.0f;
    for (int j = 0; j < p.top_k; ++j) {
      const int64_t slot = p.slot_of[t * p.top_k + j];
      routed += p.topk_weights[t * p.top_k + j] * p.expert_out[slot * p.hidden + i];
    }
    // transformers adds the shared experts after the routed ones.
    const float v = routed + (shared != nullptr ? shared[i] : 0.0f);
    out[i] = p.accumulate ? out[i] + v : v;
  }
}

}  // namespace

cudaError_t LaunchMoeRoute(const MoeRouteParams& p, cudaStream_t stream) {
  if (p.h == nullptr || p.router == nullptr || p.correction_bias == nullptr || p.logits == nullptr ||
      p.topk_ids == nullptr || p.topk_weights == nullptr || reinterpret_cast<uintptr_t>(p.router) % 16 != 0)
    return cudaErrorInvalidValue;
  if (p.tokens < 1 || p.hidden < 4 || p.hidden % 4 != 0 || p.experts < 1 || p.experts > kMoeMaxExperts ||
      p.top_k < 1 || p.top_k > p.experts || p.top_k > kMoeMaxTopK)
    return cudaErrorInvalidValue;
  const dim3 logits_grid((p.experts + kWarps - 1) / kWarps, (p.tokens + kTokensPerCta - 1) / kTokensPerCta);
  RouterLogitsKernel<<<logits_grid, 32 * kWarps, 0, stream>>>(p);
  if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  RouterTopKKernel<<<(p.tokens + kWarps - 1) / kWarps, 32 * kWarps, 0, stream>>>(p);
  return cudaGetLastError();
}

cudaError_t LaunchMoeAlign(const MoeAlignParams& p, cudaStream_t stream) {
  if (p.topk_ids == nullptr || p.slot_token == nullptr || p.slot_of == nullptr || p.tile_expert == nullptr ||
      p.num_tiles == nullptr)
    return cudaErrorInvalidValue;
  if (p.assignments < 1 || p.top_k < 1 || p.experts < 1 || p.experts > kMoeMaxExperts ||
      (p.tile_rows != 8 && p.tile_rows != 16 && p.tile_rows != 32))
    return cudaErrorInvalidValue;
  MoeAlignKernel<<<1, 1024, 0, stream>>>(p);
  return cudaGetLastError();
}

cudaError_t LaunchMoeCombine(const MoeCombineParams& p, cudaStream_t stream) {
  if (p.expert_out == nullptr || p.slot_of == nullptr || p.topk_weights == nullptr || p.out == nullptr ||
      p.tokens < 1 || p.hidden < 1 || p.top_k < 1)
    return cudaErrorInvalidValue;
  MoeCombineKernel<<<p.tokens, 256, 0, stream>>>(p);
  return cudaGetLastError();
}

}  // namespace ernie::cuda

// DecodeMoeRoute (decode_linear.h) on the device: a one-token o_proj's CTAs
// route the token from the residual rows they have just written, and the
// last of them chooses. The steps of the one-token routing kernel
// (moe_routing.cu), without its launch: at batch 1 that launch's start and
// its own reads of the residual were ~8 us of every 21B-A3B layer (NOTES.md
// v31, v36), between the o_proj that completes the residual and the experts
// that wait for the choices.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "engine/backend/cuda/kernels/common.cuh"
#include "engine/backend/cuda/kernels/decode_linear.h"
#include "engine/backend/cuda/kernels/moe_one_token.cuh"
#include "engine/backend/cuda/kernels/tma.cuh"  // PrefetchToL2

namespace ernie::cuda::kernels {

// The router's and the norm's columns of this CTA's rows, asked of the L2
// when the CTA starts, so the dots at its end do not wait on HBM: one range
// per expert (the router is [experts, hidden]). Rows past n are not asked for.
__device__ __forceinline__ void PrefetchRouterColumns(const DecodeMoeRoute& q, int64_t row0, int rows, int n) {
  const int64_t end = min(row0 + rows, int64_t{n});
  if (end <= row0) return;
  const auto bytes = static_cast<uint32_t>((end - row0) * 4);
  for (int e = threadIdx.x; e <= q.route.experts; e += blockDim.x) {
    // e == experts: the norm's weight.
    const float* base = e < q.route.experts ? q.route.router + int64_t{e} * n : q.route.norm_weight;
    PrefetchToL2(base + row0, bytes);
  }
}

// Called by every thread of every CTA of the launch once its rows of the
// residual are final: `x_rows` (shared memory) holds rows row0 .. row0 + rows
// - 1 of it (zeros past n; rows a multiple of 16), `y` the whole residual
// [n] (the other CTAs' rows are read back by the last CTA only), `scratch`
// kRouteScratchFloat4s float4s of shared memory free by now.
// Deterministic: every sum runs in a fixed order whichever CTA is last.
constexpr int kRouteScratchFloat4s = 256;
template <int kThreads>
__device__ void RouteOneTokenFromResidual(const DecodeMoeRoute& q, const float* y, int n, int64_t row0, int rows,
                                          const float* x_rows, float4* scratch) {
  static_assert(kThreads % 32 == 0 && kThreads >= 64, "whole warps, one to choose and others to normalise");
  const MoeRouteParams& route = q.route;
  const int experts = route.experts, stride = DecodeMoeRoutePartialStride(experts);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  __shared__ float sums[kMoeOneTokenMaxExperts + 4];  // the last CTA's: each expert's dot, then the squares
  __shared__ float logits[kMoeOneTokenMaxExperts];
  __shared__ OneTokenTopKShared top;
  __shared__ int last;
  __shared__ float inv_rms;
  float* mine = q.partials + int64_t{blockIdx.x} * stride;

  // 1. This CTA's dots: quarter `part` of its rows for expert e, four lanes an
  // expert, whole warps each pass (the quarters meet by shuffles).
  const int quarter = rows / 4;
  for (int base = 0; base < 4 * experts; base += kThreads) {
    const int i = base + static_cast<int>(threadIdx.x), e = i / 4, part = i % 4;
    float dot = 0.0f;
    if (i < 4 * experts) {
      const float* r = route.router + int64_t{e} * n + row0;
      for (int j = part * quarter; j < (part + 1) * quarter; j += 4) {
        if (row0 + j >= n) break;  // n % 4 == 0: a float4 lies wholly before n or after it
        const float4 w = *reinterpret_cast<const float4*>(r + j);
        const float4 g = *reinterpret_cast<const float4*>(route.norm_weight + row0 + j);
        dot += w.x * g.x * x_rows[j] + w.y * g.y * x_rows[j + 1] + w.z * g.z * x_rows[j + 2] +
               w.w * g.w * x_rows[j + 3];
      }
    }
    dot += __shfl_xor_sync(kFullMask, dot, 1);
    dot += __shfl_xor_sync(kFullMask, dot, 2);
    if (i < 4 * experts && part == 0) mine[e] = dot;
  }
  if (warp == 0) {
    float square = 0.0f;
    for (int j = lane; j < rows; j += 32) square += x_rows[j] * x_rows[j];
    square = WarpSum(square);
    if (lane == 0) mine[experts] = square;
  }
  // 2. Count in; the last CTA goes on. The fence orders this CTA's partials
  // and residual rows before its count, for whichever CTA reads them.
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) last = atomicAdd(q.arrivals, 1u) == gridDim.x - 1;
  __syncthreads();
  if (!last) return;
  __threadfence();
  if (threadIdx.x == 0) *q.arrivals = 0;  // for the next launch (graph replays)
  // Warp 0 chooses: its lanes' experts' biases, requested before the sums.
  float bias[2] = {0.0f, 0.0f};
  if (warp == 0) {
#pragma unroll
    for (int b = 0; b < 2; ++b)
      if (lane + 32 * b < experts) bias[b] = route.correction_bias[lane + 32 * b];
  }
  // 3. The sums over CTAs, every load in flight at once: each partial row is
  // `groups` float4s; thread (r, g) of `strands` x groups adds column group
  // g of CTAs r, r + strands, ... in order (L2 loads: the other CTAs'
  // stores), then each column adds its strands in order.
  const int ctas = static_cast<int>(gridDim.x), groups = stride / 4;
  const int strands = min(kRouteScratchFloat4s, kThreads) / groups;
  const auto* rows4 = reinterpret_cast<const float4*>(q.partials);
  if (threadIdx.x < strands * groups) {
    const int g = threadIdx.x % groups, r = threadIdx.x / groups;
    float4 sum = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll 12
    for (int c = r; c < ctas; c += strands) {
      const float4 v = __ldcg(rows4 + int64_t{c} * groups + g);
      sum.x += v.x, sum.y += v.y, sum.z += v.z, sum.w += v.w;
    }
    scratch[r * groups + g] = sum;
  }
  __syncthreads();
  if (threadIdx.x <= experts) {
    const int g = threadIdx.x / 4, component = threadIdx.x % 4;
    float sum = 0.0f;
    for (int r = 0; r < strands; ++r) {
      const float4 v = scratch[r * groups + g];
      sum += component == 0 ? v.x : component == 1 ? v.y : component == 2 ? v.z : v.w;
    }
    sums[threadIdx.x] = sum;
  }
  __syncthreads();
  if (threadIdx.x == 0) inv_rms = rsqrtf(sums[experts] / static_cast<float>(n) + route.eps);
  __syncthreads();
  for (int e = threadIdx.x; e < experts; e += kThreads) {
    logits[e] = sums[e] * inv_rms;
    route.logits[e] = logits[e];  // as the routing kernels leave it (scratch)
  }
  __syncthreads();
  if (warp == 0) {
    AlignOneToken(q.align, TopKOfOneToken(route, logits, bias, top));
    return;
  }
  // 4. The other warps: the normalised row in bf16 for the experts, the
  // routing kernels' expression.
  if (route.normed == nullptr) return;
  const auto* x = reinterpret_cast<const float4*>(y);
  const auto* g = reinterpret_cast<const float4*>(route.norm_weight);
  for (int i = threadIdx.x - 32; i < n / 4; i += kThreads - 32) {
    const float4 v = __ldcg(x + i), w = g[i];
    auto* out = reinterpret_cast<__nv_bfloat162*>(route.normed + 4 * int64_t{i});
    out[0] = __floats2bfloat162_rn(w.x * (v.x * inv_rms), w.y * (v.y * inv_rms));
    out[1] = __floats2bfloat162_rn(w.z * (v.z * inv_rms), w.w * (v.w * inv_rms));
  }
}

}  // namespace ernie::cuda::kernels

// One token's top-k over at most kMoeOneTokenMaxExperts experts by a whole
// CTA, shared by the routing cluster's first CTA (moe_routing.cu) and the
// folded routing's readers (moe_router_records.cuh), in three steps between
// barriers:
//   OneTokenSoftmax (warp 0, two experts a lane): the softmax as the routing
//     kernels' TopKOfToken computes it, and each expert's biased score;
//   OneTokenRanks (every thread, four to an expert): expert e's rank is how
//     many experts come before it in TopKOfToken's argmax order (a higher
//     score, or an equal one with a smaller id), each thread counting over a
//     quarter of them, so the expert of rank j is that loop's j-th choice;
//   OneTokenChoiceOfLane (warp 0): each choice's id and weight, the same
//     sums in the same order.
// So the results are TopKOfToken's bit for bit. The top_k rounds of warp
// argmax (each a shuffle reduction waiting on the last) became one warp's
// pass over every score for two experts a lane (v31); spread over the CTA,
// each thread reads 16 scores instead of 128 (v36).
#pragma once

#include <cfloat>
#include <climits>
#include <cstdint>

#include "engine/backend/cuda/kernels/common.cuh"
#include "engine/backend/cuda/kernels/moe_routing.h"

namespace ernie::cuda::kernels {

constexpr int kMoeOneTokenMaxExperts = 64;  // two a lane of one warp
static_assert(kMoeRouterRecordsMaxExperts == kMoeOneTokenMaxExperts, "the folded routing's readers use this top-k");

struct OneTokenTopKShared {
  float probs[kMoeOneTokenMaxExperts];
  float scores[kMoeOneTokenMaxExperts];  // probs + correction bias
  int32_t chosen[kMoeMaxTopK];           // routed experts, best first
};

// Warp 0. `logits` may be s.probs itself; `bias`: this lane's experts'
// correction biases (lane, lane + 32), loaded early by the caller.
__device__ __forceinline__ void OneTokenSoftmax(int experts, const float* logits, const float (&bias)[2],
                                                OneTokenTopKShared& s) {
  const int lane = threadIdx.x % 32;
  float max_logit = -FLT_MAX;
  for (int e = lane; e < experts; e += 32) {
    s.probs[e] = logits[e];
    max_logit = fmaxf(max_logit, s.probs[e]);
  }
  max_logit = WarpMax(max_logit);
  float sum = 0.0f;
  for (int e = lane; e < experts; e += 32) {
    const float v = expf(s.probs[e] - max_logit);
    s.probs[e] = v;
    sum += v;
  }
  sum = WarpSum(sum);
#pragma unroll
  for (int i = 0; i < 2; ++i) {  // bias[i] in a register: an unrolled index
    const int e = lane + 32 * i;
    if (e >= experts) break;
    s.probs[e] /= sum;
    s.scores[e] = s.probs[e] + bias[i];
  }
}

// Every thread of the CTA (whole warps), after a barrier behind
// OneTokenSoftmax; a barrier follows before the choices. kThreads: the CTA's
// threads when known at compile time and at least four an expert (the
// routing cluster's: one pass, no loop), else 0: passes of blockDim / 4.
template <int kThreads = 0>
__device__ __forceinline__ void OneTokenRanks(int experts, int top_k, OneTokenTopKShared& s) {
  auto rank_pass = [&](int i) {
    const int e = i / 4, quarter = i % 4;
    const int span = (experts + 3) / 4, first = quarter * span, last = min(experts, first + span);
    int rank = 0;
    if (i < 4 * experts) {
      const float score = s.scores[e];
      for (int o = first; o < last; ++o) {
        const float other = s.scores[o];  // the same address across each quarter's lanes: a broadcast
        rank += (other > score || (other == score && o < e)) ? 1 : 0;
      }
    }
    rank += __shfl_xor_sync(kFullMask, rank, 1);
    rank += __shfl_xor_sync(kFullMask, rank, 2);
    if (i < 4 * experts && quarter == 0 && rank < top_k) s.chosen[rank] = e;
  };
  if constexpr (kThreads >= 4 * kMoeOneTokenMaxExperts) {
    rank_pass(static_cast<int>(threadIdx.x));
  } else {
    for (int base = 0; base < 4 * experts; base += static_cast<int>(blockDim.x))
      rank_pass(base + static_cast<int>(threadIdx.x));
  }
}

// Warp 0: lane j < top_k + shared returns choice j's id (routed, then the
// shared pseudo-experts experts ..) with its weight in *weight (the routed
// ones renormalised by their sum, clamped at norm_min; shared ones 1); the
// other lanes return INT_MAX.
__device__ __forceinline__ int32_t OneTokenChoiceOfLane(int experts, int top_k, int shared, float norm_min,
                                                        const OneTokenTopKShared& s, float* weight) {
  const int lane = threadIdx.x % 32;
  float chosen_sum = 0.0f;  // in choice order, as TopKOfToken adds them
  for (int j = 0; j < top_k; ++j) chosen_sum += s.probs[s.chosen[j]];
  if (lane >= top_k + shared) return INT_MAX;
  const bool routed = lane < top_k;
  const int32_t id = routed ? s.chosen[lane] : experts + lane - top_k;
  *weight = routed ? s.probs[id] / fmaxf(chosen_sum, norm_min) : 1.0f;
  return id;
}

// Warp 0, lane j holding choice j's id (INT_MAX past the choices): the
// choice's tile, the number of chosen ids below it (one token's choices are
// distinct experts, a tile each in id order).
__device__ __forceinline__ int32_t OneTokenTileOf(int32_t id, int choices) {
  int32_t tile = 0;
  for (int o = 0; o < choices; ++o) tile += __shfl_sync(kFullMask, id, o) < id ? 1 : 0;
  return tile;
}

}  // namespace ernie::cuda::kernels

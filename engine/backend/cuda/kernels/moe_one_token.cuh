// One token's top-k and alignment in one warp: the tail of the one-token
// routing cluster (moe_routing.cu MoeRouteAlignOneTokenKernel) and of the
// o_proj that routes its own output (awq_decode_linear.cu, DecodeMoeRoute).
// The same arithmetic in both, so a token's choices and weights do not
// depend on which kernel routed it, given the same logits.
#pragma once

#include <cfloat>
#include <climits>
#include <cstdint>

#include "engine/backend/cuda/kernels/common.cuh"
#include "engine/backend/cuda/kernels/moe_routing.h"

namespace ernie::cuda::kernels {

// The one-token kernel's top-k, in one warp, for at most 64 experts (two a
// lane): the softmax as TopKOfToken computes it, then each lane ranks its
// experts against every expert's biased score, rank r being how many come
// before it in TopKOfToken's argmax order (a higher score, or an equal one
// with a smaller id), so the expert of rank j is that loop's j-th choice.
// The top_k rounds of warp argmax (each a shuffle reduction waiting on the
// last) become one pass over shared memory. The weights are the same sums
// in the same order, so the results are TopKOfToken's bit for bit. Lane j <
// choices returns choice j's id (and writes it and its weight out); the
// others return INT_MAX. `bias`: this lane's experts' correction biases
// (lane, lane + 32), loaded early by the caller.
struct OneTokenTopKShared {
  float probs[kMoeOneTokenMaxExperts];
  float scores[kMoeOneTokenMaxExperts];
  int32_t chosen[kMoeMaxTopK];
};
__device__ __forceinline__ int32_t TopKOfOneToken(const MoeRouteParams& p, const float* logits, const float (&bias)[2],
                                                  OneTokenTopKShared& s) {
  const int lane = threadIdx.x % 32;
  float max_logit = -FLT_MAX;
  for (int e = lane; e < p.experts; e += 32) {
    s.probs[e] = logits[e];
    max_logit = fmaxf(max_logit, s.probs[e]);
  }
  max_logit = WarpMax(max_logit);
  float sum = 0.0f;
  for (int e = lane; e < p.experts; e += 32) {
    const float v = expf(s.probs[e] - max_logit);
    s.probs[e] = v;
    sum += v;
  }
  sum = WarpSum(sum);
#pragma unroll
  for (int i = 0; i < 2; ++i) {  // bias[i] in a register: an unrolled index
    const int e = lane + 32 * i;
    if (e >= p.experts) break;
    s.probs[e] /= sum;
    s.scores[e] = s.probs[e] + bias[i];
  }
  __syncwarp();
  for (int e = lane; e < p.experts; e += 32) {
    const float score = s.scores[e];
    int rank = 0;
    for (int o = 0; o < p.experts; ++o) {
      const float other = s.scores[o];  // the same address across the warp: a broadcast
      rank += (other > score || (other == score && o < e)) ? 1 : 0;
    }
    if (rank < p.top_k) s.chosen[rank] = e;
  }
  __syncwarp();
  float chosen_sum = 0.0f;  // in choice order, as TopKOfToken adds them
  for (int j = 0; j < p.top_k; ++j) chosen_sum += s.probs[s.chosen[j]];
  const int choices = p.top_k + p.shared_experts;
  if (lane >= choices) return INT_MAX;
  const bool routed = lane < p.top_k;  // else a shared expert, unweighted
  const int32_t id = routed ? s.chosen[lane] : p.experts + lane - p.top_k;
  p.topk_ids[lane] = id;
  p.topk_weights[lane] = routed ? s.probs[id] / fmaxf(chosen_sum, p.norm_min) : 1.0f;
  return id;
}

// AlignAssignments for one token, in one warp: its choices are distinct
// experts, one assignment each, so expert e's tile is the number of chosen
// ids below e (the padded counts' scan) and its slot that tile's first;
// the rest of each tile is padding. Lane j < choices holds choice j's id.
__device__ __forceinline__ void AlignOneToken(const MoeAlignParams& p, int32_t id) {
  const int lane = threadIdx.x % 32, choices = p.top_k;
  int32_t tile = 0;
  for (int o = 0; o < choices; ++o) tile += __shfl_sync(kFullMask, id, o) < id ? 1 : 0;
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

}  // namespace ernie::cuda::kernels

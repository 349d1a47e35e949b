// One token's routing folded into the launches around it (moe_routing.h's
// MoeRouterRecords), on the device: the o_proj's side, which writes a record
// per thread-block cluster, and the readers' side, which chooses from them.
#pragma once

#include <cuda_runtime.h>

#include <cfloat>
#include <climits>
#include <cstdint>

#include "engine/backend/cuda/kernels/cluster_sync.cuh"
#include "engine/backend/cuda/kernels/common.cuh"
#include "engine/backend/cuda/kernels/linear_mma.cuh"  // CpAsync16
#include "engine/backend/cuda/kernels/moe_one_token_topk.cuh"
#include "engine/backend/cuda/kernels/moe_routing.h"
#include "engine/backend/cuda/kernels/tma.cuh"

namespace ernie::cuda::kernels {

// The router's and the norm's columns of rows [row0, row0 + rows) asked of
// the L2 when the o_proj CTA starts, so that its dots at the end do not wait
// on HBM: one range an expert (the router is [experts, hidden]). Thread 0.
__device__ __forceinline__ void PrefetchRouterColumns(const MoeRouterRecords& q, int64_t row0, int rows) {
  const int64_t end = min(row0 + rows, int64_t{q.hidden});
  if (end <= row0) return;
  const auto bytes = static_cast<uint32_t>((end - row0) * 4);
  for (int e = 0; e <= q.experts; ++e)  // e == experts: the norm's weight
    PrefetchToL2((e < q.experts ? q.router + int64_t{e} * q.hidden : q.norm_weight) + row0, bytes);
}

// The router's and the norm's columns of a CTA's rows, copied into shared
// memory (cp.async, one commit group) when the o_proj CTA starts, for CTAs of
// at most kRouterColumnsMaxRows rows (the 21B-A3B's o_proj: 16): its dots
// then read no global memory after the residual is final. A row of 36
// floats keeps 16-byte copies aligned and neighbouring experts' reads on
// other banks.
constexpr int kRouterColumnsMaxRows = 32;
struct RouterColumns {
  static constexpr int kRowFloats = kRouterColumnsMaxRows + 4;
  float w[kMoeRouterRecordsMaxExperts + 1][kRowFloats];  // row `experts`: the norm's weight
};
// Every thread; `live` rows from row0 (a multiple of 4, row0 of 16).
__device__ __forceinline__ void CopyRouterColumns(const MoeRouterRecords& q, int64_t row0, int live,
                                                  RouterColumns& c) {
  const int quads = live / 4;
  for (int i = static_cast<int>(threadIdx.x); i < (q.experts + 1) * quads; i += static_cast<int>(blockDim.x)) {
    const int e = i / quads, quad = i % quads;
    const float* src = (e < q.experts ? q.router + int64_t{e} * q.hidden : q.norm_weight) + row0 + 4 * quad;
    CpAsync16(&c.w[e][4 * quad], src);
  }
  CpAsyncCommit();
}

// The o_proj's side. Every thread of every CTA calls it once its rows of the
// residual are final: `rows[r]` (shared memory) is residual row row0 + r for
// r < live (rows past the residual's end are not read); `columns` the
// router's and norm's columns CopyRouterColumns staged (landed and
// synchronised), or nullptr to read them from global memory. The launch is
// clusters of cluster_size CTAs along x that arrived (ClusterArrive) when
// they started. Each CTA's dots (four threads an expert, a quarter of the
// rows each, met by shuffles) and sum of squares go to its cluster's first
// CTA, which adds them in rank order and stores the cluster's record.
template <int kThreads>
__device__ void WriteRouterRecord(const MoeRouterRecords& q, const float* rows, int64_t row0, int live,
                                  const RouterColumns* columns) {
  static_assert(kThreads % 32 == 0, "whole warps");
  constexpr int kStride = MoeRouterRecordStride(kMoeRouterRecordsMaxExperts);
  __shared__ float received[kMoeRouterRecordClusterMax][kStride];  // the first CTA's: every rank's dots
  const uint32_t rank = ClusterRank(), size = ClusterSize();
  const int experts = q.experts, quarter = (live + 3) / 4;
  ClusterWait();  // every CTA of the cluster runs: its shared memory may be written
  for (int base = 0; base < 4 * experts; base += kThreads) {
    const int i = base + static_cast<int>(threadIdx.x), e = i / 4, part = i % 4;
    float dot = 0.0f;
    if (i < 4 * experts) {
      const float* r = columns != nullptr ? columns->w[e] : q.router + int64_t{e} * q.hidden + row0;
      const float* g = columns != nullptr ? columns->w[experts] : q.norm_weight + row0;
      const int end = min(live, (part + 1) * quarter);
      for (int j = part * quarter; j < end; ++j) dot += r[j] * g[j] * rows[j];
    }
    dot += __shfl_xor_sync(kFullMask, dot, 1);
    dot += __shfl_xor_sync(kFullMask, dot, 2);
    if (i < 4 * experts && part == 0) StoreToCluster(ClusterSharedAddress(&received[rank][e], 0), dot);
  }
  if (threadIdx.x < 32) {
    float square = 0.0f;
    for (int j = static_cast<int>(threadIdx.x); j < live; j += 32) square += rows[j] * rows[j];
    square = WarpSum(square);
    if (threadIdx.x == 0) StoreToCluster(ClusterSharedAddress(&received[rank][experts], 0), square);
  }
  ClusterArriveRelease();
  ClusterWait();  // every rank's dots are in the first CTA's shared memory
  if (rank != 0) return;
  float* record = q.records + int64_t{blockIdx.x / size} * MoeRouterRecordStride(experts);
  for (int e = static_cast<int>(threadIdx.x); e <= experts; e += kThreads) {
    float sum = 0.0f;
    for (uint32_t c = 0; c < size; ++c) sum += received[c][e];
    record[e] = sum;
  }
}

// What a reader knows once it has chosen.
struct OneTokenChoice {
  // The records' sums in three parts (ChooseFromRouterRecords): the dots, then the squares.
  float parts[3][MoeRouterRecordStride(kMoeRouterRecordsMaxExperts)];
  OneTokenTopKShared top;
  int32_t expert_of_tile[kMoeMaxTopK];
  int32_t tile_of_choice[kMoeMaxTopK];        // choices in MoeRouteParams' order: routed, then shared
  float weight_of_choice[kMoeMaxTopK];
  float inv_rms;                              // of the residual row, for its RMSNorm
};

// The readers' side: every thread of the CTA (any number of whole warps)
// calls it; it ends with a barrier, after which `s` holds the choice. The
// records are summed in a fixed order, so the sums, and the choice, do not
// depend on the reader's CTA size. The softmax, the biased top-k and the
// weights are the routing cluster's (moe_one_token_topk.cuh).
__device__ __forceinline__ void ChooseFromRouterRecords(const MoeRouterRecords& q, OneTokenChoice& s) {
  const int lane = static_cast<int>(threadIdx.x % 32), warp = static_cast<int>(threadIdx.x / 32);
  const int experts = q.experts, stride = MoeRouterRecordStride(experts);
  float bias[2] = {0.0f, 0.0f};  // warp 0's lanes' experts, requested first
  if (warp == 0) {
#pragma unroll
    for (int i = 0; i < 2; ++i)
      if (lane + 32 * i < experts) bias[i] = q.correction_bias[lane + 32 * i];
  }
  // The sums over records in kRecordParts fixed parts (part p: records p,
  // p + kRecordParts, ...), then the parts added in order: the same
  // arithmetic whatever the CTA's size. A thread asks for kRecordBatch
  // records of its part at once (those past the count read as 0, which
  // leaves the sum as it was), so at the 21B-A3B's 20 records one L2 round
  // trip brings them all; four parts of five in batches of four took two,
  // and 4 x 65 items left four threads of a 256-thread CTA a second item
  // (a third round trip). Three parts of 65 columns are one item a thread
  // in the gate/up and down launches. L2 loads (__ldcg): the records are the
  // o_proj's, never in this SM's L1.
  constexpr int kRecordParts = 3, kRecordBatch = 8;
  static_assert(sizeof(s.parts) / sizeof(s.parts[0]) >= kRecordParts, "a row of parts a part");
  const int columns = experts + 1;
  for (int i = static_cast<int>(threadIdx.x); i < kRecordParts * columns; i += static_cast<int>(blockDim.x)) {
    const int e = i % columns, part = i / columns;
    const float* column = q.records + e;
    float sum = 0.0f;
    for (int c0 = part; c0 < q.count; c0 += kRecordBatch * kRecordParts) {
      float v[kRecordBatch];
#pragma unroll
      for (int u = 0; u < kRecordBatch; ++u) {
        const int c = c0 + u * kRecordParts;
        v[u] = c < q.count ? __ldcg(column + int64_t{c} * stride) : 0.0f;
      }
#pragma unroll
      for (int u = 0; u < kRecordBatch; ++u) sum += v[u];
    }
    s.parts[part][e] = sum;
  }
  __syncthreads();
  if (warp == 0) {
    auto total = [&](int e) { return (s.parts[0][e] + s.parts[1][e]) + s.parts[2][e]; };
    const float inv_rms = rsqrtf(total(experts) / static_cast<float>(q.hidden) + q.eps);
    for (int e = lane; e < experts; e += 32) s.top.probs[e] = total(e) * inv_rms;  // the logits, in place
    OneTokenSoftmax(experts, s.top.probs, bias, s.top);
    if (lane == 0) s.inv_rms = inv_rms;
  }
  __syncthreads();
  OneTokenRanks(experts, q.top_k, s.top);
  __syncthreads();
  if (warp == 0) {
    float weight = 0.0f;
    const int32_t id = OneTokenChoiceOfLane(experts, q.top_k, q.shared_experts, q.norm_min, s.top, &weight);
    const int choices = q.top_k + q.shared_experts;
    const int32_t tile = OneTokenTileOf(id, choices);
    if (lane < choices) {
      s.tile_of_choice[lane] = tile;
      s.expert_of_tile[tile] = id;
      s.weight_of_choice[lane] = weight;
    }
  }
  __syncthreads();
}

}  // namespace ernie::cuda::kernels

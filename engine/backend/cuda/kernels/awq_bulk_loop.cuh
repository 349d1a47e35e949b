// The int4 k loop of awq_blocks.cuh (AwqAccumulateSlice) with the weights
// brought to shared memory by bulk copies (cp.async.bulk, the TMA engine)
// instead of into registers: used by the int4 GEMV for m <= 8 (awq_gemm.cu).
//
// Why: at m = 1 the register loop holds two to three 2 KiB chunks a warp in
// flight at 118 registers (two CTAs an SM), and ncu has the warps waiting on
// those loads a third of the time (v11: 0.50 of HBM on 8192 x 8192; an L2
// prefetch did not help, v12). Here each warp keeps kAwqBulkStages chunks
// in flight in its own shared-memory ring, the copies cost one instruction
// a chunk for the weights and one for each g's records, and no register
// holds a chunk that is not being computed.
//
// Per warp: a ring of kAwqBulkStages stages, each a chunk's packed words (4
// blocks of 512 bytes, contiguous in the tile's layout) and, per g, the
// 16-byte group pairs of records the chunk's k touches (AwqBulkRecordBytes),
// and one mbarrier a stage. Lane 0 arrives on the stage's barrier with the
// bytes to expect and copies the weights; lanes 0 - 7 copy the records of
// g = lane; every lane then waits on the barrier's phase, reads its own
// 16-byte piece of each block (conflict-free: 32 lanes x 16 contiguous bytes)
// and its g's records, and computes the chunk as the register loop does
// (AwqComputeChunk). The stage is refilled once the whole warp has read it.
#pragma once

#include <cuda/ptx>

#include <cstdint>

#include "engine/backend/cuda/kernels/awq_blocks.cuh"

namespace ernie::cuda::kernels {

constexpr int kAwqBulkStages = 4;
constexpr int kAwqChunkWeightBytes = kAwqChunkBlocks * 512;

// Record bytes a stage holds for one g: the group pairs one chunk's 256 k
// touch (group 32: 4 pairs, 64: 2, 128 and longer: 1).
__host__ __device__ constexpr int AwqBulkRecordBytes(int group_shift) {
  return group_shift >= 8 ? 16 : 8 * (kAwqChunkK >> group_shift);
}
__host__ __device__ constexpr int AwqBulkStageBytes(int group_shift) {
  return kAwqChunkWeightBytes + 8 * AwqBulkRecordBytes(group_shift);
}
// Shared memory of one warp's ring.
__host__ __device__ constexpr int AwqBulkRingBytes(int group_shift) {
  return kAwqBulkStages * AwqBulkStageBytes(group_shift);
}

// AwqAccumulateSlice's contract for one tile of x rows (m <= 8), plus:
//   ring:  this warp's AwqBulkRingBytes(group_shift) of shared memory,
//          16-byte aligned
//   bars:  this warp's kAwqBulkStages mbarriers in shared memory
// The whole warp calls it (it synchronises the warp).
template <int kScaleHalves, bool kXSums, typename AfterWait = NothingAfterWait>
__device__ __forceinline__ void AwqAccumulateSliceBulk(const uint32_t* tile_packed, const uint32_t* tile_records,
                                                       const __nv_bfloat16* const (&x_row)[1],
                                                       const __nv_bfloat16* any_row, const float* x_sums, int k,
                                                       int group_shift, int slice, int k_slices, float (*acc)[4],
                                                       unsigned char* ring, uint64_t* bars,
                                                       const AfterWait& after_wait = {}) {
  using Chunk = AwqChunk<kScaleHalves>;
  namespace ptx = ::cuda::ptx;
  const int lane = threadIdx.x % 32, g = lane / 4;
  const int blocks = k / kAwqBlockK, chunks = AwqChunks(k), groups2 = AwqRecordGroups2(k, group_shift);
  const int record_bytes = AwqBulkRecordBytes(group_shift), stage_bytes = AwqBulkStageBytes(group_shift);
  const int my_chunks = slice < chunks ? (chunks - 1 - slice) / k_slices + 1 : 0;
  const uint4* x_lane[1];
  unsigned no_x[1];
  AwqLaneXRows<1>(x_row, any_row, x_lane, no_x);

  if (lane == 0) {
#pragma unroll
    for (int s = 0; s < kAwqBulkStages; ++s) ptx::mbarrier_init(bars + s, 1);
    // The barriers' initialisation visible to the copy engine before its first complete_tx.
    ptx::fence_mbarrier_init(ptx::sem_release, ptx::scope_cluster);
  }
  __syncwarp();

  // The first record pair a chunk's copy starts at (records are 8 bytes, a pair 16).
  auto first_pair_record = [&](int ch) { return ((ch * kAwqChunkK) >> group_shift) & ~1; };
  // Chunk i (< my_chunks) of the slice into stage i % kAwqBulkStages. The
  // barrier's tx count may go below zero when a record copy lands before
  // lane 0 arrives; the phase cannot complete before that arrival.
  auto issue = [&](int i) {
    const int ch = slice + i * k_slices, s = i % kAwqBulkStages, b0 = ch * kAwqChunkBlocks;
    const int weight_bytes = min(kAwqChunkBlocks, blocks - b0) * 512;
    const int first = first_pair_record(ch), last = (min(ch * kAwqChunkK + kAwqChunkK, k) - 1) >> group_shift;
    const int copy_record_bytes = ((last - first) / 2 + 1) * 16;
    unsigned char* stage = ring + s * stage_bytes;
    if (lane == 0) {
      ptx::mbarrier_arrive_expect_tx(ptx::sem_release, ptx::scope_cta, ptx::space_shared, bars + s,
                                     static_cast<uint32_t>(weight_bytes + 8 * copy_record_bytes));
      ptx::cp_async_bulk(ptx::space_cluster, ptx::space_global, stage, tile_packed + int64_t{b0} * 128,
                         static_cast<uint32_t>(weight_bytes), bars + s);
    }
    if (lane < 8)
      ptx::cp_async_bulk(ptx::space_cluster, ptx::space_global, stage + kAwqChunkWeightBytes + lane * record_bytes,
                         tile_records + (int64_t{lane} * groups2 + first) * 2, static_cast<uint32_t>(copy_record_bytes),
                         bars + s);
  };

  for (int i = 0; i < kAwqBulkStages && i < my_chunks; ++i) issue(i);  // the weights never wait for x
  WaitForPrerequisiteGrids();  // x may come from the kernel before
  after_wait();
  for (int i = 0; i < my_chunks; ++i) {
    const int ch = slice + i * k_slices, s = i % kAwqBulkStages;
    while (!ptx::mbarrier_try_wait_parity(bars + s, static_cast<uint32_t>(i / kAwqBulkStages) & 1u)) {
    }
    const unsigned char* stage = ring + s * stage_bytes;
    Chunk v;
#pragma unroll
    for (int u = 0; u < kAwqChunkBlocks; ++u)  // blocks past k (the partial chunk) hold stale bytes, never used
      v.w[u] = reinterpret_cast<const uint4*>(stage)[u * 32 + lane];
    const uint2* records = reinterpret_cast<const uint2*>(stage + kAwqChunkWeightBytes + g * record_bytes);
    const int first = first_pair_record(ch);
#pragma unroll
    for (int j = 0; j < Chunk::kUnits; ++j)
      v.rec[j] = records[(min(ch * kAwqChunkK + 32 * kScaleHalves * j, k - 1) >> group_shift) - first];
    AwqComputeChunk<1, kScaleHalves, kXSums>(v, ch, blocks, x_lane, x_sums, 1, acc);
    if (i + kAwqBulkStages < my_chunks) {
      __syncwarp();  // every lane has read the stage (its values went into the mmas above)
      issue(i + kAwqBulkStages);
    }
  }
  AwqZeroColumnsWithoutX<1>(no_x, acc);
}

}  // namespace ernie::cuda::kernels

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
// and one mbarrier a stage. One elected lane arrives on the stage's barrier
// with the weight bytes to expect and issues their bulk copy; the records,
// 8 x 16 - 64 bytes strided by the tile's record rows, go by one 16-byte
// cp.async a lane (8 - 32 lanes), each lane's completion an arrival on the
// barrier (cp.async.mbarrier.arrive.noinc). (v14's first version issued
// one bulk copy per g: a bulk copy's operands are uniform registers, so the
// compiler looped over the 8 lanes, ~70 instructions a chunk.) Every lane
// then waits on the barrier's phase, reads its own 16-byte piece of each
// block (conflict-free: 32 lanes x 16 contiguous bytes) and its g's records,
// and computes the chunk as the register loop does (AwqComputeChunk). The
// stage is refilled once the whole warp has read it.
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

// Arrives on `bar` once this thread's earlier cp.async copies have landed,
// without adding to the phase's expected arrivals (the barrier's count
// includes them).
__device__ __forceinline__ void CpAsyncArriveNoInc(uint64_t* bar) {
  const auto address = static_cast<uint32_t>(__cvta_generic_to_shared(bar));
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(address) : "memory");
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
  const int my_chunks = slice < chunks ? DivBySlices(chunks - 1 - slice, k_slices) + 1 : 0;
  // The record copies: lane l < 8 x pieces copies 16-byte piece l % pieces of row g = l / pieces.
  const int pieces = record_bytes / 16, record_lanes = 8 * pieces;
  const bool copies_records = lane < record_lanes;
  const int copy_g = lane / pieces, copy_piece = lane % pieces;
  const uint32_t* copy_records = tile_records + int64_t{copy_g} * groups2 * 2 + 4 * copy_piece;

  if (lane == 0) {
#pragma unroll
    for (int s = 0; s < kAwqBulkStages; ++s) ptx::mbarrier_init(bars + s, record_lanes + 1);
    // The barriers' initialisation visible to the copy engine before its first complete_tx.
    ptx::fence_mbarrier_init(ptx::sem_release, ptx::scope_cluster);
  }
  __syncwarp();

  // The first record (a pair's first) a chunk's copy starts at.
  auto first_record = [&](int ch) { return ((ch * kAwqChunkK) >> group_shift) & ~1; };
  // Chunk i (< my_chunks) of the slice into stage s = i % kAwqBulkStages.
  auto issue = [&](int i, int s) {
    const int ch = slice + i * k_slices, b0 = ch * kAwqChunkBlocks;
    unsigned char* stage = ring + s * stage_bytes;
    if (lane == 0) {
      const int weight_bytes = min(kAwqChunkBlocks, blocks - b0) * 512;
      ptx::mbarrier_arrive_expect_tx(ptx::sem_release, ptx::scope_cta, ptx::space_shared, bars + s,
                                     static_cast<uint32_t>(weight_bytes));
      ptx::cp_async_bulk(ptx::space_cluster, ptx::space_global, stage, tile_packed + int64_t{b0} * 128,
                         static_cast<uint32_t>(weight_bytes), bars + s);
    }
    if (copies_records) {
      // Pieces past the chunk's last group pair (its k ends early) copy nothing but still arrive.
      const int first = first_record(ch), last = (min(ch * kAwqChunkK + kAwqChunkK, k) - 1) >> group_shift;
      const bool live = copy_piece <= (last - first) / 2;
      CpAsync16OrZero(stage + kAwqChunkWeightBytes + copy_g * record_bytes + 16 * copy_piece,
                      copy_records + int64_t{first} * 2, live);
      CpAsyncArriveNoInc(bars + s);
    }
  };

  for (int i = 0; i < kAwqBulkStages && i < my_chunks; ++i) issue(i, i);  // the weights never wait for x
  WaitForPrerequisiteGrids();  // x may come from the kernel before
  after_wait();
  const uint4* x_lane[1];  // after after_wait, which may set x_row (as AwqAccumulateSlice)
  unsigned no_x[1];
  AwqLaneXRows<1>(x_row, any_row, x_lane, no_x);
  uint32_t parity = 0;
  for (int i0 = 0; i0 < my_chunks; i0 += kAwqBulkStages, parity ^= 1u) {
#pragma unroll
    for (int s = 0; s < kAwqBulkStages; ++s) {
      const int i = i0 + s;
      if (i >= my_chunks) break;
      const int ch = slice + i * k_slices;
      while (!ptx::mbarrier_try_wait_parity(bars + s, parity)) {
      }
      const unsigned char* stage = ring + s * stage_bytes;
      Chunk v;
#pragma unroll
      for (int u = 0; u < kAwqChunkBlocks; ++u)  // blocks past k (the partial chunk) hold stale bytes, never used
        v.w[u] = reinterpret_cast<const uint4*>(stage)[u * 32 + lane];
      const uint2* records = reinterpret_cast<const uint2*>(stage + kAwqChunkWeightBytes + g * record_bytes);
      const int first = first_record(ch);
#pragma unroll
      for (int j = 0; j < Chunk::kUnits; ++j)
        v.rec[j] = records[(min(ch * kAwqChunkK + 32 * kScaleHalves * j, k - 1) >> group_shift) - first];
      AwqComputeChunk<1, kScaleHalves, kXSums>(v, ch, blocks, x_lane, x_sums, 1, acc);
      if (i + kAwqBulkStages < my_chunks) {
        __syncwarp();  // every lane has read the stage (its values went into the mmas above)
        issue(i + kAwqBulkStages, s);
      }
    }
  }
  AwqZeroColumnsWithoutX<1>(no_x, acc);
}

}  // namespace ernie::cuda::kernels

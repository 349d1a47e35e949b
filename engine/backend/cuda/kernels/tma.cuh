// Device side of the asynchronous copy engines (sm_90): mbarriers that count
// bytes, TMA box loads (cp.async.bulk.tensor, descriptors from
// tensor_map.h) and bulk copies from this CTA's shared memory into another
// CTA's of the cluster. One thread issues each copy; the hardware moves the
// bytes and credits them to an mbarrier that the consumers wait on, so a
// 16 KB tile costs a handful of instructions where cp.async took one
// instruction (and its address arithmetic) per 16 bytes a thread.
#pragma once

#include <cuda.h>

#include <cstdint>

#include "engine/backend/cuda/kernels/common.cuh"  // L2EvictFirstPolicy
#include "engine/backend/cuda/kernels/wgmma.cuh"   // SharedAddress

namespace ernie::cuda::kernels {

// An mbarrier expecting `arrivals` arrivals a phase.
__device__ __forceinline__ void MbarrierInit(uint64_t* bar, uint32_t arrivals) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(SharedAddress(bar)), "r"(arrivals) : "memory");
}

// Makes the initialisations above visible to the cluster (and to the async
// proxy) before any copy signals them; a cluster barrier or __syncthreads
// must still follow before other threads use them.
__device__ __forceinline__ void FenceMbarrierInit() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}

// This thread's arrival, announcing `bytes` more bytes that copies will credit.
__device__ __forceinline__ void MbarrierArriveExpectBytes(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(SharedAddress(bar)), "r"(bytes)
               : "memory");
}

// Waits until the phase of parity `parity` has completed (every arrival and
// every announced byte in).
__device__ __forceinline__ void MbarrierWait(uint64_t* bar, uint32_t parity) {
  const uint32_t addr = SharedAddress(bar);
  uint32_t done = 0;
  do {
    asm volatile(
        "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(addr), "r"(parity)
        : "memory");
  } while (done == 0);
}

// The box of `map` at (column, row) into `dst` (shared memory, 1,024-byte
// aligned for the 128-byte swizzle), its bytes credited to `bar`. With
// evict_first (bytes read once a step: weights), under L2EvictFirstPolicy, so
// they do not push out what the next kernels read again (activations, the
// residual, KV, code), as linear_mma.cuh's register and cp.async loads do.
__device__ __forceinline__ void TmaLoad2d(void* dst, const CUtensorMap* map, int32_t column, int32_t row,
                                          uint64_t* bar, bool evict_first = false) {
  if (evict_first) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint"
        " [%0], [%1, {%2, %3}], [%4], %5;\n" ::"r"(SharedAddress(dst)),
        "l"(reinterpret_cast<uint64_t>(map)), "r"(column), "r"(row), "r"(SharedAddress(bar)),
        "l"(L2EvictFirstPolicy())
        : "memory");
  } else {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
        " [%0], [%1, {%2, %3}], [%4];\n" ::"r"(SharedAddress(dst)),
        "l"(reinterpret_cast<uint64_t>(map)), "r"(column), "r"(row), "r"(SharedAddress(bar))
        : "memory");
  }
}

// The address of this CTA's shared `p` in the cluster's CTA of rank `rank`.
__device__ __forceinline__ uint32_t ClusterSharedAddress(const void* p, uint32_t rank) {
  uint32_t out;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(out) : "r"(SharedAddress(p)), "r"(rank));
  return out;
}

// `bytes` (a multiple of 16; both ends 16-byte aligned) of this CTA's shared
// memory at `src` to `dst` in another CTA's (ClusterSharedAddress), credited
// to that CTA's mbarrier `remote_bar` (ClusterSharedAddress too). Reads of
// `src` written by generic stores need FenceSharedForAsyncProxy first.
__device__ __forceinline__ void BulkCopyToCluster(uint32_t dst, const void* src, uint32_t bytes,
                                                  uint32_t remote_bar) {
  asm volatile(
      "cp.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(dst),
      "r"(SharedAddress(src)), "r"(bytes), "r"(remote_bar)
      : "memory");
}

// Asks the L2 for `bytes` (a multiple of 16) of global memory from `p` (16-byte
// aligned): one request the copy engine splits, no registers held, nothing
// to wait for. Later loads of those lines hit the L2 or the fill in flight.
__device__ __forceinline__ void PrefetchToL2(const void* p, uint32_t bytes) {
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;\n" ::"l"(p), "r"(bytes) : "memory");
}

// Closes this thread's bulk copies into a group and waits until they have
// read their sources (the CTA may then exit or reuse them).
__device__ __forceinline__ void BulkCopiesWaitRead() {
  asm volatile("cp.async.bulk.commit_group;\ncp.async.bulk.wait_group.read 0;\n" ::: "memory");
}

}  // namespace ernie::cuda::kernels

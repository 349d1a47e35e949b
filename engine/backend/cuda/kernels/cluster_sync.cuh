// Thread-block cluster synchronisation shared by the kernels that hand data
// between a cluster's CTAs through distributed shared memory (the
// small-batch GEMM's split-k sum, the one-token MoE routing).
//
// Distributed shared memory may be written only once every CTA of the
// cluster runs: a kernel arrives (relaxed) early and waits before its first
// remote store, by when the others have usually arrived. A hand-off then
// takes an arrive with release semantics and a wait with acquire semantics.
// Every thread of a CTA calls each (the .aligned forms), arrive and wait
// alternating.
#pragma once

#include <cstdint>

namespace ernie::cuda::kernels {

__device__ __forceinline__ void ClusterArrive() {
  asm volatile("barrier.cluster.arrive.relaxed.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void ClusterArriveRelease() { asm volatile("barrier.cluster.arrive.aligned;\n" ::: "memory"); }
// Acquire: what the other CTAs stored before their (release) arrival is visible.
__device__ __forceinline__ void ClusterWait() { asm volatile("barrier.cluster.wait.aligned;\n" ::: "memory"); }

__device__ __forceinline__ uint32_t ClusterRank() {
  uint32_t rank;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(rank));
  return rank;
}

// CTAs in this CTA's cluster.
__device__ __forceinline__ uint32_t ClusterSize() {
  uint32_t size;
  asm volatile("mov.u32 %0, %%cluster_nctarank;\n" : "=r"(size));
  return size;
}

// v to a cluster shared-memory address (tma.cuh's ClusterSharedAddress).
__device__ __forceinline__ void StoreToCluster(uint32_t cluster_address, float v) {
  asm volatile("st.shared::cluster.f32 [%0], %1;\n" ::"r"(cluster_address), "f"(v) : "memory");
}

}  // namespace ernie::cuda::kernels

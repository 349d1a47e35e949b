// Device helpers shared by the kernels: warp and block reductions, bf16
// vector loads.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace ernie::cuda::kernels {

constexpr unsigned kFullMask = 0xffffffffu;

__device__ __forceinline__ float WarpSum(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(kFullMask, v, offset);
  return v;
}

__device__ __forceinline__ float WarpMax(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v = fmaxf(v, __shfl_xor_sync(kFullMask, v, offset));
  return v;
}

// Sum over the block (blockDim.x a multiple of 32, at most 1024); every
// thread gets the result. `scratch` holds 32 floats of shared memory.
__device__ __forceinline__ float BlockSum(float v, float* scratch) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  v = WarpSum(v);
  __syncthreads();  // scratch may still be read by a previous call
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < warps ? scratch[lane] : 0.0f;
  return WarpSum(v);
}

// Programmatic dependent launch (sm_90): a kernel launched with
// cudaLaunchAttributeProgrammaticStreamSerialization may start while the
// kernel before it still runs, once every CTA of that one has called
// AllowDependentLaunch; it must call WaitForPrerequisiteGrids before reading
// anything the earlier kernels wrote (or writing what they read), and that
// wait returns only when they have completed and their writes are visible.
// Both are no-ops for kernels launched without the attribute.
__device__ __forceinline__ void AllowDependentLaunch() { asm volatile("griddepcontrol.launch_dependents;" ::: "memory"); }
__device__ __forceinline__ void WaitForPrerequisiteGrids() { asm volatile("griddepcontrol.wait;" ::: "memory"); }

// A flag another CTA (of this kernel or one running beside it) raises with a
// release store: the value seen by up to `spins` acquire loads, `sleep_ns`
// apart, stopping once it is at least `target`. Bounded, so a flag that never
// comes costs time, never a hang; the caller takes the fallback.
__device__ __forceinline__ uint32_t PollAtLeast(const uint32_t* flag, uint32_t target, int spins, unsigned sleep_ns) {
  uint32_t seen = 0;
  for (int i = 0; i < spins; ++i) {
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(seen) : "l"(flag) : "memory");
    if (seen >= target) break;
    __nanosleep(sleep_ns);
  }
  return seen;
}
__device__ __forceinline__ void StoreRelease(uint32_t* flag, uint32_t value) {
  asm volatile("st.release.gpu.global.u32 [%0], %1;" ::"l"(flag), "r"(value) : "memory");
}

// Launches `kernel` as a programmatic dependent of the kernel before it on
// `stream`: its launch and start overlap that kernel's tail. The kernel must
// call WaitForPrerequisiteGrids before touching memory earlier work writes
// or reads.
template <typename... Params, typename... Args>
cudaError_t LaunchDependent(void (*kernel)(Params...), dim3 grid, dim3 block, size_t shared_bytes,
                            cudaStream_t stream, Args... args) {
  cudaLaunchAttribute dependent;
  dependent.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  dependent.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config = {};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = shared_bytes;
  config.stream = stream;
  config.attrs = &dependent;
  config.numAttrs = 1;
  return cudaLaunchKernelEx(&config, kernel, args...);
}

// The launch configuration of a programmatic dependent (LaunchDependent) in
// thread-block clusters of `cluster_x` CTAs along x (the grid's x a multiple
// of it), its attributes in `attrs`; also what cluster occupancy queries take.
inline cudaLaunchConfig_t DependentClusterConfig(dim3 grid, dim3 block, size_t shared_bytes, cudaStream_t stream,
                                                 unsigned cluster_x, cudaLaunchAttribute (&attrs)[2]) {
  attrs[0].id = cudaLaunchAttributeClusterDimension;
  attrs[0].val.clusterDim.x = cluster_x;
  attrs[0].val.clusterDim.y = 1;
  attrs[0].val.clusterDim.z = 1;
  attrs[1].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attrs[1].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config = {};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = shared_bytes;
  config.stream = stream;
  config.attrs = attrs;
  config.numAttrs = 2;
  return config;
}

// LaunchDependent in thread-block clusters of `cluster_x` CTAs along x.
template <typename... Params, typename... Args>
cudaError_t LaunchDependentInClusters(void (*kernel)(Params...), dim3 grid, dim3 block, size_t shared_bytes,
                                      cudaStream_t stream, unsigned cluster_x, Args... args) {
  cudaLaunchAttribute attrs[2];
  const cudaLaunchConfig_t config = DependentClusterConfig(grid, block, shared_bytes, stream, cluster_x, attrs);
  return cudaLaunchKernelEx(&config, kernel, args...);
}

// Two floats as a bf16 pair (round to nearest even) in one 32-bit word, lo first.
__device__ __forceinline__ uint32_t PackBf16x2(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}

// Four floats to four bf16 at `out` (8-byte aligned), one store.
__device__ __forceinline__ void StoreBf16x4(__nv_bfloat16* out, float a, float b, float c, float d) {
  *reinterpret_cast<uint2*>(out) = make_uint2(PackBf16x2(a, b), PackBf16x2(c, d));
}

// Host side: whether `ptr` is a multiple of `bytes`, as the kernels' vector accesses need.
inline bool AlignedTo(const void* ptr, uintptr_t bytes) { return reinterpret_cast<uintptr_t>(ptr) % bytes == 0; }
inline bool Aligned16(const void* ptr) { return AlignedTo(ptr, 16); }

// SiLU, g sigmoid(g), in the one float expression every kernel that applies
// it uses (SiLU-and-mul and the linears' fused epilogues agree bit for bit).
__device__ __forceinline__ float Silu(float g) { return g / (1.0f + expf(-g)); }

// An L2 cache policy that makes the lines an access brings in the first to
// be evicted: for bytes a step reads once (weights; large steps' keys and
// values), so they do not push out what later kernels read again. Takes a
// register operand of the loads' .L2::cache_hint forms (LoadStreaming16,
// CpAsync16, CpAsync16OrZero, TmaLoad2d); a constant the SASS sets up once.
__device__ __forceinline__ uint64_t L2EvictFirstPolicy() {
  uint64_t policy;
  asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(policy));
  return policy;
}

// The same policy for bytes read once, or an explicit normal priority for
// bytes other CTAs of the launch read again, chosen at run time: a kernel that
// decides per CTA passes one operand to every copy instead of branching at
// each. The explicit evict_normal policy is not the plain copy: it measured
// slower in some tiles and faster in others (grouped_gemm_epilogue.cuh,
// GroupedWeightCopies; NOTES.md v50).
__device__ __forceinline__ uint64_t L2StreamPolicy(bool read_once) {
  uint64_t normal;
  asm("createpolicy.fractional.L2::evict_normal.b64 %0, 1.0;\n" : "=l"(normal));
  return read_once ? L2EvictFirstPolicy() : normal;
}

// Eight bf16 values (one 16-byte load, already made) widened to float.
//
// A bf16 is the top half of the float32 with the same value, so each one is
// one shift or one mask of its word: 8 instructions for the 8 values, where
// __bfloat1622float2 took 12 (a byte permute and a shift for each upper one;
// ncu SASS of the batch-1 decode linear, v19).
// The first (low) and second (high) bf16 of a 32-bit word as float.
__device__ __forceinline__ float Bf16Lo(uint32_t word) { return __uint_as_float(word << 16); }
__device__ __forceinline__ float Bf16Hi(uint32_t word) { return __uint_as_float(word & 0xffff0000u); }

__device__ __forceinline__ void WidenBf16x8(const uint4& raw, float* dst) {
  const uint32_t words[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    dst[2 * i] = Bf16Lo(words[i]);
    dst[2 * i + 1] = Bf16Hi(words[i]);
  }
}

// Eight bf16 values (16 bytes, 16-byte aligned) loaded and widened to float.
__device__ __forceinline__ void LoadBf16x8(const __nv_bfloat16* src, float* dst) {
  WidenBf16x8(*reinterpret_cast<const uint4*>(src), dst);
}

}  // namespace ernie::cuda::kernels

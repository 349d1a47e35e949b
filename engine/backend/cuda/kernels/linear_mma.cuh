// Device helpers shared by the small-M linear kernels (gemv_bf16.cu,
// awq_gemm.cu): one bf16 tensor-core instruction, streaming loads, and the
// cross-warp reduction and store of the [16 rows x 8 columns] accumulator
// tiles; also the shared-memory pieces the tiled kernels use (cp.async,
// ldmatrix, the grouped GEMMs' k pipeline).
//
// The kernels compute y^T = W x^T ("swap AB"): W's rows are the A operand of
// mma.m16n8k16 (16 output features per warp) and the activations x are the
// B operand, whose 8 columns are 8 rows of x. So M <= 8 costs one tensor-core
// tile per 16 output features and k-step, the weights are read once, and
// the tensor cores keep the math far below the memory time at any M <= 32.
//
// Fragment layout of mma.m16n8k16 (PTX ISA, "Matrix fragments for
// mma.m16n8k16"), for lane = 4 g + c (g = groupID 0..7, c = 0..3):
//   A (16 x 16, bf16): a0a1 = (row g,   k 2c, 2c+1)   a2a3 = (row g+8, k 2c, 2c+1)
//                      a4a5 = (row g,   k 2c+8, 2c+9) a6a7 = (row g+8, k 2c+8, 2c+9)
//   B (16 x 8,  bf16): b0b1 = (k 2c, 2c+1, col g)     b2b3 = (k 2c+8, 2c+9, col g)
//   D (16 x 8,  f32):  d0 d1 = (row g, col 2c, 2c+1)  d2 d3 = (row g+8, col 2c, 2c+1)
// The sum over k does not care which physical k each of the 16 slots holds,
// as long as A and B agree; each kernel picks the assignment that lets a
// lane load its slots with wide contiguous loads (described in its file).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <tuple>
#include <vector>

#include "engine/backend/cuda/kernels/common.cuh"

namespace ernie::cuda::kernels {

// a / k_slices for the k-slice counts the linear kernels take (1, 2, 4 or 8,
// PickKSlices): a shift, where a division by a runtime value is ~20
// instructions (ncu SASS of the int4 GEMV, v14: three a warp in its prologue).
__device__ __forceinline__ int DivBySlices(int a, int k_slices) { return a >> (__ffs(k_slices) - 1); }

// D += A B on the tensor cores: bf16 operands, float32 accumulation.
// a[0..3] = a0a1, a2a3, a4a5, a6a7; b[0..1] = b0b1, b2b3; d[0..3] as above.
__device__ __forceinline__ void MmaBf16(float* d, const uint32_t* a, uint32_t b0, uint32_t b1) {
  // Not volatile: a pure function of its operands, free for the scheduler to move.
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// 16 bytes of data read exactly once (weights): not kept in L1, so L1 stays
// for the activations, which every warp re-reads, and first to go from the
// L2 (an evict_first policy), so the weights streaming through it do not
// push out what the next kernels read again: activations, the residual,
// norms, the KV cache, kernel code. The AWQ 0.3b step at 64 rows (the int4
// small-batch GEMM stages its weights through this load) ~1.5% faster on an
// H100, 16 rows within noise, batch 1 unchanged (NOTES.md v38).
__device__ __forceinline__ uint4 LoadStreaming16(const void* p) {
  uint4 v;
  const uint64_t policy = L2EvictFirstPolicy();  // folded into the loads' memory descriptor, set up once
  asm("ld.global.nc.L1::no_allocate.L2::cache_hint.v4.u32 {%0,%1,%2,%3}, [%4], %5;\n"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
      : "l"(p), "l"(policy));
  return v;
}

// Asynchronous 16-byte copies global -> shared, not kept in L1 (cp.async.cg),
// and the group bookkeeping around them (PTX ISA "cp.async"). First under an
// L2 cache policy (common.cuh: L2EvictFirstPolicy), then the plain copy.
__device__ __forceinline__ void CpAsync16Hinted(void* smem, const void* gmem, uint64_t policy) {
  const auto s = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem), "l"(policy)
               : "memory");
}
__device__ __forceinline__ void CpAsync16(void* smem, const void* gmem) {
  const auto s = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(gmem) : "memory");
}
// The same copies, or 16 zero bytes when !valid (src-size 0 reads nothing).
__device__ __forceinline__ void CpAsync16OrZeroHinted(void* smem, const void* gmem, bool valid, uint64_t policy) {
  const auto s = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2, %3;\n" ::"r"(s), "l"(gmem),
               "r"(valid ? 16 : 0), "l"(policy)
               : "memory");
}
// With evict_first, under L2EvictFirstPolicy (bytes the step reads once:
// large steps' keys and values, PagedAttentionParams::stream_kv).
__device__ __forceinline__ void CpAsync16OrZero(void* smem, const void* gmem, bool valid, bool evict_first = false) {
  if (evict_first) return CpAsync16OrZeroHinted(smem, gmem, valid, L2EvictFirstPolicy());
  const auto s = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem), "r"(valid ? 16 : 0)
               : "memory");
}
// Four 8x8 bf16 matrices from shared memory: lanes 8i .. 8i+7 give the
// 16-byte row addresses of matrix i; lane 4g + c receives elements 2c, 2c+1
// of row g of each. With k along a row, that is an A fragment (matrices:
// rows 0-7 / 8-15 x k 0-7 / 8-15) or two B fragments of mma.m16n8k16.
__device__ __forceinline__ void LdMatrixX4(uint32_t* r, const void* smem) {
  const auto s = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(s)
               : "memory");
}
// Four 8x8 bf16 matrices, transposed: lanes 8i..8i+7 give the row addresses
// of matrix i; lane 4g + c receives rows 2c, 2c+1 of column g of each, which
// is the B fragment of mma.m16n8k16 for a row-major [k][n] tile.
__device__ __forceinline__ void LdMatrixX4Trans(uint32_t* r, const void* smem) {
  const auto s = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(s)
               : "memory");
}

__device__ __forceinline__ void CpAsyncCommit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int kPending>
__device__ __forceinline__ void CpAsyncWait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}

// The k loop of the grouped tiled GEMMs (grouped_expert_gemm.cu,
// grouped_awq_gemm.cu): a kStages-deep cp.async pipeline over `blocks` k
// blocks, stage kb % kStages holding block kb. copy_weights(kb) and
// copy_slots(kb) issue one block's copies; compute(kb) multiplies a block
// once every thread's copies of it have landed. The first blocks' weights
// are requested before WaitForPrerequisiteGrids (a no-op unless launched as
// a programmatic dependent): weights never depend on the kernel before; the
// slots' activations do. Block s's copies are all done when commit group s
// is (group 0 also holds the early weights).
template <int kStages, typename CopyWeights, typename CopySlots, typename Compute>
__device__ __forceinline__ void CpAsyncPipeline(int blocks, const CopyWeights& copy_weights,
                                                const CopySlots& copy_slots, const Compute& compute) {
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s)
    if (s < blocks) copy_weights(s);
  WaitForPrerequisiteGrids();
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < blocks) copy_slots(s);
    CpAsyncCommit();
  }
  for (int kb = 0; kb < blocks; ++kb) {
    // Block kb has landed for every thread, and every warp is done with
    // block kb - 1, whose stage the copies below refill.
    CpAsyncWait<kStages - 2>();
    __syncthreads();
    if (kb + kStages - 1 < blocks) {
      copy_weights(kb + kStages - 1);
      copy_slots(kb + kStages - 1);
    }
    CpAsyncCommit();
    compute(kb);
  }
}

constexpr int kLinearWarps = 8;  // warps of every small-M linear CTA (256 threads)

// The CTA's cross-warp sum, in two halves so that kernels with their own
// epilogue can share it. Warp w = row_group * k_slices + slice holds, in
// acc[t][0..3], the partial sums of its 16-row tile over its k slice for
// columns (x rows) 8t .. 8t+7, in the D layout above. `red` is shared memory
// of kLinearWarps * 16 * 8 * kTiles floats. StageAccumulators writes them
// there (synchronising the CTA before and after); StagedRowSum(r, m) is then
// the full sum for row r of the CTA (0 .. 16 kLinearWarps / k_slices) and
// column m, readable by any thread.
template <int kTiles>
__device__ __forceinline__ void StageAccumulators(float (*acc)[4], float* red) {
  constexpr int kCols = 8 * kTiles;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, c = lane % 4;
  __syncthreads();  // `red` may alias shared memory other warps still read
  float* mine = red + warp * 16 * kCols;
#pragma unroll
  for (int t = 0; t < kTiles; ++t) {
    mine[g * kCols + 8 * t + 2 * c] = acc[t][0];
    mine[g * kCols + 8 * t + 2 * c + 1] = acc[t][1];
    mine[(g + 8) * kCols + 8 * t + 2 * c] = acc[t][2];
    mine[(g + 8) * kCols + 8 * t + 2 * c + 1] = acc[t][3];
  }
  __syncthreads();
}

template <int kTiles>
__device__ __forceinline__ float StagedRowSum(const float* red, int k_slices, int r, int m) {
  constexpr int kCols = 8 * kTiles;
  const int group = r / 16;
  float sum = 0.0f;
  for (int s = 0; s < k_slices; ++s) sum += red[((group * k_slices + s) * 16 + r % 16) * kCols + m];
  return sum;
}

// The sum and a plain store: y[m, n] for m < m_rows and n < n_rows only; y
// is float or bf16 [m, n].
template <int kTiles>
__device__ __forceinline__ void ReduceAndStore(float (*acc)[4], float* red, int k_slices, int64_t row0_of_cta,
                                               int n_rows, int m_rows, void* y, bool y_bf16) {
  StageAccumulators<kTiles>(acc, red);
  const int rows_of_cta = 16 * (kLinearWarps / k_slices);
  for (int i = threadIdx.x; i < rows_of_cta * m_rows; i += blockDim.x) {
    const int m = i / rows_of_cta, r = i % rows_of_cta;  // consecutive threads: consecutive n
    const int64_t n = row0_of_cta + r;
    if (n >= n_rows) continue;
    const float sum = StagedRowSum<kTiles>(red, k_slices, r, m);
    const int64_t at = int64_t{m} * n_rows + n;
    if (y_bf16) {
      static_cast<__nv_bfloat16*>(y)[at] = __float2bfloat16(sum);
    } else {
      static_cast<float*>(y)[at] = sum;
    }
  }
}

// Host side: how many warps share one 16-row tile along k (1, 2, 4 or 8).
// More slices mean more CTAs and more loads in flight, at the cost of a
// shared-memory sum; the largest count whose grid still fits in one wave of
// resident CTAs is taken (a second partial wave would idle most SMs), and
// no slice is left without a k block. `resident_ctas` = SMs x CTAs per SM.
inline int PickKSlices(int64_t row_tiles, int64_t k_blocks, int64_t resident_ctas) {
  int slices = 1;
  while (slices < kLinearWarps && 2 * slices <= k_blocks) {
    const int64_t tiles_per_cta = kLinearWarps / (2 * slices);
    const int64_t ctas = (row_tiles + tiles_per_cta - 1) / tiles_per_cta;
    if (ctas > resident_ctas) break;
    slices *= 2;
  }
  return slices;
}

// The launch of a GEMV of kLinearWarps-warp CTAs over `row_tiles` 16-row
// tiles: its k split (`asked` when > 0, else PickKSlices) and its grid.
struct GemvLaunchShape {
  int k_slices = 1;
  unsigned grid = 0;
};
inline GemvLaunchShape PickGemvLaunchShape(int64_t row_tiles, int64_t k_blocks, int64_t resident_ctas, int asked) {
  const int k_slices = asked > 0 ? asked : PickKSlices(row_tiles, k_blocks, resident_ctas);
  const int64_t tiles_per_cta = kLinearWarps / k_slices;
  return {k_slices, static_cast<unsigned>((row_tiles + tiles_per_cta - 1) / tiles_per_cta)};
}

// The current device's SM count, asked once per process (the backend drives
// one kind of device); 0 with `*error` set on failure.
inline int MultiprocessorCount(cudaError_t* error) {
  static std::atomic<int> cached{0};
  int sms = cached.load(std::memory_order_relaxed);
  if (sms > 0) return sms;
  int device = 0;
  *error = cudaGetDevice(&device);
  if (*error == cudaSuccess) *error = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  if (*error != cudaSuccess) return 0;
  cached.store(sms, std::memory_order_relaxed);
  return sms;
}

// SMs x CTAs of `kKernel` (`warps` warps, 256 threads by default) resident
// per SM with `shared_bytes` of dynamic shared memory a CTA, 0 with `*error`
// set on failure. Never less than one a SM, so callers may divide by it: a
// CTA that does not fit at all also answers one, and launchers whose shared
// memory varies check it against OptInToMaxDynamicShared's bytes first.
// Asked of the runtime once per (warps, shared bytes) and process: launchers
// whose CTA shape varies by launch ask on every launch.
template <auto kKernel>
inline int64_t ResidentCtasWithShared(size_t shared_bytes, cudaError_t* error, int warps = kLinearWarps) {
  static std::mutex mu;
  static std::vector<std::tuple<int, size_t, int64_t>> known;  // (warps, shared bytes, resident CTAs)
  {
    std::lock_guard<std::mutex> lock(mu);
    for (const auto& [w, bytes, resident] : known)
      if (w == warps && bytes == shared_bytes) return resident;
  }
  const int sms = MultiprocessorCount(error);
  int per_sm = 0;
  if (sms > 0) *error = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kKernel, 32 * warps, shared_bytes);
  if (sms == 0 || *error != cudaSuccess) return 0;
  const int64_t resident = int64_t{sms} * (per_sm > 0 ? per_sm : 1);
  std::lock_guard<std::mutex> lock(mu);
  known.emplace_back(warps, shared_bytes, resident);
  return resident;
}

// The same for 256-thread CTAs with static shared memory only: the query
// most launchers make on every eager launch, so it is answered from an
// atomic once known rather than through the mutex above.
template <auto kKernel>
inline int64_t ResidentCtas(cudaError_t* error) {
  static std::atomic<int64_t> cached{0};
  int64_t value = cached.load(std::memory_order_relaxed);
  if (value > 0) return value;
  value = ResidentCtasWithShared<kKernel>(0, error);
  if (value > 0) cached.store(value, std::memory_order_relaxed);
  return value;
}

// Opts `kKernel` in, once per process, to the device's whole per-block
// shared memory less the kernel's static share; returns the dynamic bytes a
// launch may now ask for, or 0 with `*error` set on failure. (Asking for
// the whole opt-in size with static shared memory declared fails.)
template <auto kKernel>
inline int OptInToMaxDynamicShared(cudaError_t* error) {
  static int max_bytes = 0;
  static const cudaError_t opt_in = [] {
    int device = 0, optin = 0;
    cudaFuncAttributes attributes{};
    cudaError_t e = cudaGetDevice(&device);
    if (e == cudaSuccess) e = cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device);
    if (e == cudaSuccess) e = cudaFuncGetAttributes(&attributes, kKernel);
    if (e == cudaSuccess) {
      max_bytes = optin - static_cast<int>(attributes.sharedSizeBytes);
      e = cudaFuncSetAttribute(kKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, max_bytes);
    }
    return e;
  }();
  *error = opt_in;
  return opt_in == cudaSuccess ? max_bytes : 0;
}

}  // namespace ernie::cuda::kernels

// Read-only probes (stream_probe.h).
#include "engine/backend/cuda/kernels/awq_blocks.cuh"
#include "engine/backend/cuda/kernels/common.cuh"
#include "engine/backend/cuda/kernels/linear_mma.cuh"
#include "tools/bench/cuda/stream_probe.h"

namespace ernie::bench {

namespace {

using cuda::kernels::kAwqBlockK;
using cuda::kernels::kAwqChunkBlocks;
using cuda::kernels::kLinearWarps;

// What the xor of everything read is compared with: the store behind the
// comparison (almost) never happens, but the compiler must keep every load.
constexpr uint32_t kNeverXor = 0x9e3779b9u;

__device__ __forceinline__ uint32_t XorOf(const uint4& v) { return v.x ^ v.y ^ v.z ^ v.w; }

// Two ranges read as one (the packed words, then the records): piece i is
// a[i] below a_pieces, b[i - a_pieces] after.
template <int kUnroll>
__global__ void __launch_bounds__(256)
    StreamReadKernel(const uint4* a, int64_t a_pieces, const uint4* b, int64_t pieces, uint32_t* sink) {
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  uint32_t acc = 0;
  for (int64_t base = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; base < pieces; base += stride * kUnroll) {
    uint4 v[kUnroll];
    // Clamped rather than predicated: the loads are asm the compiler may hoist out of a branch.
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t i = min(base + u * stride, pieces - 1);
      v[u] = cuda::kernels::LoadStreaming16(i < a_pieces ? a + i : b + (i - a_pieces));
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
      if (base + u * stride < pieces) acc ^= XorOf(v[u]);
  }
  if (acc == kNeverXor) *sink = acc;
}

// The int4 GEMV's walk for one x tile and groups >= 128
// (awq_blocks.cuh's AwqWalkSlice, the loop AwqAccumulateSlice runs), an xor
// for the math. kStage: x staged with its unit sums after the wait and the
// k slices' sums stored at the end, as AwqGemvKernel does (with the xor as
// the sums). kDequant: each chunk's nibble pairs turned into bf16 as the k
// loop does (AwqBiasedPair), xor-ed instead of multiplied.
template <bool kStage, bool kDequant>
__global__ void __launch_bounds__(32 * kLinearWarps, 2)
    AwqWalkKernel(cuda::AwqWeightsView w, const __nv_bfloat16* x, float* y, int k_slices, int group_shift,
                  uint32_t* sink) {
  cuda::kernels::AllowDependentLaunch();
  __shared__ float red[kLinearWarps * 16 * 8];  // kStage: the cross-warp sum
  extern __shared__ uint4 staged_x[];             // kStage: [1][k + pad] bf16 and the unit sums
  constexpr int kScaleHalves = 4;
  using Chunk = cuda::kernels::AwqChunk<kScaleHalves>;
  const int warp = threadIdx.x / 32;
  const int tiles_per_cta = cuda::kernels::DivBySlices(kLinearWarps, k_slices);
  const int64_t tiles = (int64_t{w.n} + 15) / 16;
  const int64_t tile =
      min(int64_t{blockIdx.x} * tiles_per_cta + cuda::kernels::DivBySlices(warp, k_slices), tiles - 1);
  const int k = w.k, groups2 = cuda::kernels::AwqRecordGroups2(k, group_shift);
  auto stage = [&] {
    if constexpr (kStage) {
      auto* xs = reinterpret_cast<__nv_bfloat16*>(staged_x);
      cuda::kernels::StageAwqXRowsWithSums<kScaleHalves>(1, k, xs, cuda::kernels::AwqStagedXSums(xs, 1, k),
                                                         [&](int) { return x; });
      __syncthreads();
    }
  };
  uint32_t acc = 0;
  auto xor_chunk = [&](const Chunk& v, int) {
#pragma unroll
    for (int u = 0; u < kAwqChunkBlocks; ++u) {
      if constexpr (kDequant) {
#pragma unroll
        for (int word = 0; word < 4; ++word)
#pragma unroll
          for (int q = 0; q < 4; ++q) acc ^= cuda::kernels::AwqBiasedPair(cuda::kernels::AwqWordOf(v.w[u], word), q);
      } else {
        acc ^= XorOf(v.w[u]);
      }
    }
#pragma unroll
    for (int j = 0; j < Chunk::kUnits; ++j) acc ^= v.rec[j].x ^ v.rec[j].y;
  };
  cuda::kernels::AwqWalkSlice<kScaleHalves, cuda::kernels::kAwqChunksInFlight<1>>(
      w.packed + tile * (k / kAwqBlockK) * 32 * 4, w.records + tile * 8 * groups2 * 2, k, group_shift,
      warp & (k_slices - 1), k_slices, stage, /*wait=*/true, xor_chunk);
  if constexpr (kStage) {
    float sums[1][4] = {{static_cast<float>(acc & 1u), 0.0f, 0.0f, 0.0f}};
    cuda::kernels::ReduceAndStore<1>(sums, red, k_slices, int64_t{blockIdx.x} * tiles_per_cta * 16, w.n, 1, y, false);
  } else if (acc == kNeverXor) {
    *sink = acc;
  }
}

// The GEMV launcher's own shape (PickGemvLaunchShape, as awq_gemm.cu's LaunchGemvTiles).
template <bool kStage, bool kDequant>
cudaError_t LaunchWalk(const AwqWalkParams& p, int group_shift, cudaStream_t stream) {
  constexpr auto kKernel = AwqWalkKernel<kStage, kDequant>;
  cudaError_t error = cudaSuccess;
  const int64_t resident = cuda::kernels::ResidentCtas<kKernel>(&error);
  if (error != cudaSuccess) return error;
  const cuda::kernels::GemvLaunchShape shape = cuda::kernels::PickGemvLaunchShape(
      (int64_t{p.w.n} + 15) / 16, cuda::kernels::AwqChunks(p.w.k), resident, p.k_slices);
  const size_t staged = kStage ? static_cast<size_t>(cuda::kernels::AwqStagedXBytes(1, p.w.k, 4)) : 0;
  return cuda::kernels::LaunchDependent(kKernel, shape.grid, dim3(32 * kLinearWarps), staged, stream, p.w, p.x, p.y,
                                        shape.k_slices, group_shift, p.sink);
}

template <int kUnroll>
cudaError_t LaunchStreamReadUnrolled(const void* a, int64_t a_bytes, const void* b, int64_t b_bytes, int ctas,
                                     uint32_t* sink, cudaStream_t stream) {
  StreamReadKernel<kUnroll><<<ctas, 256, 0, stream>>>(static_cast<const uint4*>(a), a_bytes / 16,
                                                      static_cast<const uint4*>(b), (a_bytes + b_bytes) / 16, sink);
  return cudaGetLastError();
}

}  // namespace

cudaError_t LaunchStreamRead(const void* a, int64_t a_bytes, const void* b, int64_t b_bytes, int ctas_per_sm,
                             int unroll, uint32_t* sink, cudaStream_t stream) {
  auto bad_range = [](const void* p, int64_t bytes) {
    return bytes < 0 || bytes % 16 != 0 || (bytes > 0 && (p == nullptr || !cuda::kernels::Aligned16(p)));
  };
  if (sink == nullptr || bad_range(a, a_bytes) || bad_range(b, b_bytes) || a_bytes + b_bytes == 0 ||
      ctas_per_sm < 1 || ctas_per_sm > 8)
    return cudaErrorInvalidValue;
  cudaError_t error = cudaSuccess;
  const int sms = cuda::kernels::MultiprocessorCount(&error);
  if (error != cudaSuccess) return error;
  const int ctas = sms * ctas_per_sm;
  switch (unroll) {
    case 2: return LaunchStreamReadUnrolled<2>(a, a_bytes, b, b_bytes, ctas, sink, stream);
    case 4: return LaunchStreamReadUnrolled<4>(a, a_bytes, b, b_bytes, ctas, sink, stream);
    case 8: return LaunchStreamReadUnrolled<8>(a, a_bytes, b, b_bytes, ctas, sink, stream);
    default: return cudaErrorInvalidValue;
  }
}

cudaError_t LaunchAwqWalk(const AwqWalkParams& p, cudaStream_t stream) {
  const cuda::AwqWeightsView& w = p.w;
  // The GEMV's own checks of the weights (awq_gemm.h), and groups of 128 or more.
  const int group_shift = cuda::CheckedGroupShift(w);
  if (group_shift < 0 || p.sink == nullptr || w.group_size < 128) return cudaErrorInvalidValue;
  if (p.k_slices != 0 && p.k_slices != 1 && p.k_slices != 2 && p.k_slices != 4 && p.k_slices != 8)
    return cudaErrorInvalidValue;
  if (p.stage_and_reduce && (p.x == nullptr || p.y == nullptr || !cuda::kernels::Aligned16(p.x) ||
                             cuda::kernels::AwqStagedXBytes(1, w.k, 4) > cuda::kernels::kAwqMaxStagedXBytes))
    return cudaErrorInvalidValue;
  if (p.stage_and_reduce) {
    return p.dequantize ? LaunchWalk<true, true>(p, group_shift, stream)
                        : LaunchWalk<true, false>(p, group_shift, stream);
  }
  return p.dequantize ? LaunchWalk<false, true>(p, group_shift, stream)
                      : LaunchWalk<false, false>(p, group_shift, stream);
}

}  // namespace ernie::bench

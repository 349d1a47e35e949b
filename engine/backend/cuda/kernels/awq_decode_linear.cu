// The fused decode linear on AWQ int4 weights (see awq_decode_linear.h).
#include <cuda_bf16.h>

#include <algorithm>

#include "engine/backend/cuda/kernels/awq_blocks.cuh"
#include "engine/backend/cuda/kernels/awq_decode_linear.h"
#include "engine/backend/cuda/kernels/common.cuh"
#include "engine/backend/cuda/kernels/decode_epilogue.cuh"
#include "engine/backend/cuda/kernels/linear_mma.cuh"

namespace ernie::cuda {

namespace {

using kernels::kAwqBlockK;
using kernels::kLinearWarps;

// Input row r of p into xs[r][0..k) as bf16, RMS-normalised in float32 when
// asked (the same expression as AddRmsNormKernel). One warp per row; the
// caller synchronises the CTA before reading xs.
__device__ void StageInputRows(const DecodeLinearParams& p, __nv_bfloat16* xs) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int r = warp; r < p.m; r += kLinearWarps) {
    const int64_t src = p.row_index != nullptr ? p.row_index[r] : r;
    __nv_bfloat16* row = xs + int64_t{r} * p.k;
    if (p.x_bf16 != nullptr) {
      for (int i = lane * 8; i < p.k; i += 32 * 8)
        *reinterpret_cast<uint4*>(row + i) = *reinterpret_cast<const uint4*>(p.x_bf16 + src * p.k + i);
      continue;
    }
    const float* in = p.x_f32 + src * p.k;
    float scale = 1.0f;
    if (p.norm_weight != nullptr) {
      float sum_sq = 0.0f;
      for (int i = lane * 4; i < p.k; i += 32 * 4) {
        const float4 v = *reinterpret_cast<const float4*>(in + i);
        sum_sq += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
      }
      scale = rsqrtf(kernels::WarpSum(sum_sq) / static_cast<float>(p.k) + p.eps);
    }
    for (int i = lane * 4; i < p.k; i += 32 * 4) {
      const float4 v = *reinterpret_cast<const float4*>(in + i);
      float o[4] = {v.x, v.y, v.z, v.w};
      if (p.norm_weight != nullptr)
#pragma unroll
        for (int e = 0; e < 4; ++e) o[e] = p.norm_weight[i + e] * (o[e] * scale);
      *reinterpret_cast<__nv_bfloat162*>(row + i) = __floats2bfloat162_rn(o[0], o[1]);
      *reinterpret_cast<__nv_bfloat162*>(row + i + 2) = __floats2bfloat162_rn(o[2], o[3]);
    }
  }
}

// The weight tile of local tile l (0 .. tiles_per_cta) of this CTA, and
// whether it is past the last (grid rounding: the last is read again and
// its rows dropped by the epilogue).
__device__ __forceinline__ int64_t TileOf(const DecodeLinearParams& p, int l, int tiles_per_cta) {
  const int64_t tiles = (int64_t{p.n} + 15) / 16;
  if (p.epilogue != DecodeEpilogue::kSiluMul) return min(int64_t{blockIdx.x} * tiles_per_cta + l, tiles - 1);
  const int half = tiles_per_cta / 2;
  const int64_t width_tiles = p.n / 2 / 16;
  const int64_t feature_tile = min(int64_t{blockIdx.x} * half + l % half, width_tiles - 1);
  return feature_tile + (l >= half ? width_tiles : 0);
}

template <int kScaleHalves>
__global__ void __launch_bounds__(32 * kLinearWarps, kScaleHalves == 4 ? 2 : 1)
    AwqDecodeLinearKernel(DecodeLinearParams p, AwqWeightsView w, int k_slices, int group_shift) {
  kernels::AllowDependentLaunch();   // launched as a dependent: see LaunchDependent
  extern __shared__ uint4 xs_raw[];  // [m, k] bf16 input rows
  __shared__ float red[kLinearWarps * 16 * 8];
  auto* xs = reinterpret_cast<__nv_bfloat16*>(xs_raw);
  const int warp = threadIdx.x / 32, g = threadIdx.x % 32 / 4;
  const int tiles_per_cta = kLinearWarps / k_slices, slice = warp % k_slices;
  const int64_t tile = TileOf(p, warp / k_slices, tiles_per_cta);
  const int k = p.k, groups2 = kernels::AwqRecordGroups2(k, group_shift);
  const __nv_bfloat16* x_row[1] = {g < p.m ? xs + int64_t{g} * k : nullptr};
  float acc[1][4] = {};
  kernels::AwqAccumulateSlice<1, kScaleHalves>(w.packed + tile * (k / kAwqBlockK) * 32 * 4,
                                               w.records + tile * 8 * groups2 * 2, x_row, 1, k, group_shift, slice,
                                               k_slices, acc, [&] {
                                                 StageInputRows(p, xs);
                                                 __syncthreads();
                                               });
  kernels::StageAccumulators<1>(acc, red);

  const int rows_of_cta = 16 * tiles_per_cta;
  auto bias = [&](int64_t row) { return p.bias != nullptr ? p.bias[row] : 0.0f; };
  switch (p.epilogue) {
    case DecodeEpilogue::kStore:
    case DecodeEpilogue::kAddResidual:
      for (int i = threadIdx.x; i < rows_of_cta * p.m; i += blockDim.x) {
        const int r = i % rows_of_cta, m = i / rows_of_cta;  // consecutive threads: consecutive n
        const int64_t row = int64_t{blockIdx.x} * rows_of_cta + r;
        if (row >= p.n) continue;
        const float v = kernels::StagedRowSum<1>(red, k_slices, r, m) + bias(row);
        float& out = p.y[int64_t{m} * p.n + row];
        out = p.epilogue == DecodeEpilogue::kStore ? v : out + v;
      }
      break;
    case DecodeEpilogue::kSiluMul: {
      const int features = rows_of_cta / 2;
      const int64_t width = p.n / 2;
      for (int i = threadIdx.x; i < features * p.m; i += blockDim.x) {
        const int f = i % features, m = i / features;
        const int64_t feature = int64_t{blockIdx.x} * features + f;
        if (feature >= width) continue;
        const float gate = kernels::StagedRowSum<1>(red, k_slices, f, m) + bias(feature);
        const float up = kernels::StagedRowSum<1>(red, k_slices, features + f, m) + bias(width + feature);
        p.y[int64_t{m} * width + feature] = gate / (1.0f + expf(-gate)) * up;  // as SiluAndMulKernel
      }
      break;
    }
    case DecodeEpilogue::kRotaryKv:
      for (int i = threadIdx.x; i < rows_of_cta / 2 * p.m; i += blockDim.x) {
        const int r = 2 * (i % (rows_of_cta / 2)), m = i / (rows_of_cta / 2);
        const int64_t a = int64_t{blockIdx.x} * rows_of_cta + r;
        if (a >= p.n) continue;
        kernels::RotaryKvStore(p, m, a, kernels::StagedRowSum<1>(red, k_slices, r, m) + bias(a),
                               kernels::StagedRowSum<1>(red, k_slices, r + 1, m) + bias(a + 1));
      }
      break;
  }
}

template <int kScaleHalves>
cudaError_t Launch(const DecodeLinearParams& p, const AwqWeightsView& w, int group_shift, cudaStream_t stream) {
  auto* kernel = AwqDecodeLinearKernel<kScaleHalves>;
  const size_t shared = sizeof(__nv_bfloat16) * static_cast<size_t>(p.m) * static_cast<size_t>(p.k);
  cudaError_t error = cudaSuccess;
  const int64_t resident = kernels::ResidentCtas<AwqDecodeLinearKernel<kScaleHalves>>(&error);
  if (error != cudaSuccess) return error;
  const bool silu = p.epilogue == DecodeEpilogue::kSiluMul;
  const int64_t row_tiles = (int64_t{p.n} + 15) / 16;
  // SiLU pairs a gate tile with its up tile in one CTA: at least two tiles a CTA.
  int k_slices = kernels::PickKSlices(row_tiles, kernels::AwqChunks(p.k), resident);
  if (silu) k_slices = std::min(k_slices, kLinearWarps / 2);
  const int64_t tiles_per_cta = kLinearWarps / k_slices;
  const int64_t ctas = silu ? (row_tiles / 2 + tiles_per_cta / 2 - 1) / (tiles_per_cta / 2)
                            : (row_tiles + tiles_per_cta - 1) / tiles_per_cta;
  return kernels::LaunchDependent(kernel, dim3(static_cast<unsigned>(ctas)), dim3(32 * kLinearWarps), shared, stream, p,
                                  w, k_slices, group_shift);
}


}  // namespace

cudaError_t PrepareAwqDecodeLinear(int32_t max_k, int32_t max_rows) {
  if (max_k <= 0 || max_rows < 0 || max_rows > kDecodeLinearMaxRows) return cudaErrorInvalidValue;
  const int bytes = static_cast<int>(sizeof(__nv_bfloat16)) * max_rows * max_k;
  cudaError_t e = cudaFuncSetAttribute(AwqDecodeLinearKernel<1>, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
  if (e == cudaSuccess)
    e = cudaFuncSetAttribute(AwqDecodeLinearKernel<4>, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
  return e;
}

cudaError_t LaunchAwqDecodeLinear(const DecodeLinearParams& p, const AwqWeightsView& w, cudaStream_t stream) {
  const int group_shift = CheckedGroupShift(w);
  const bool one_input = (p.x_f32 != nullptr) != (p.x_bf16 != nullptr);
  if (group_shift < 0 || !one_input || p.y == nullptr || p.m < 1 || p.m > kDecodeLinearMaxRows || p.n != w.n ||
      p.k != w.k || (p.norm_weight != nullptr && p.x_f32 == nullptr))
    return cudaErrorInvalidValue;
  if ((p.x_f32 != nullptr && !kernels::Aligned16(p.x_f32)) || (p.x_bf16 != nullptr && !kernels::Aligned16(p.x_bf16)))
    return cudaErrorInvalidValue;
  if (p.epilogue == DecodeEpilogue::kSiluMul && p.n % 32 != 0) return cudaErrorInvalidValue;
  if (p.epilogue == DecodeEpilogue::kRotaryKv && !RotaryKvParamsValid(p)) return cudaErrorInvalidValue;
  if (kernels::AwqScaleHalves(w.group_size) == 4) return Launch<4>(p, w, group_shift, stream);
  return Launch<1>(p, w, group_shift, stream);
}

}  // namespace ernie::cuda

// The fused decode linear on AWQ int4 weights (see awq_decode_linear.h).
#include <cuda_bf16.h>

#include <algorithm>

#include "engine/backend/cuda/kernels/awq_blocks.cuh"
#include "engine/backend/cuda/kernels/awq_decode_linear.h"
#include "engine/backend/cuda/kernels/common.cuh"
#include "engine/backend/cuda/kernels/decode_epilogue.cuh"
#include "engine/backend/cuda/kernels/linear_mma.cuh"
#include "engine/backend/cuda/kernels/moe_router_records.cuh"

namespace ernie::cuda {

namespace {

using kernels::kAwqBlockK;
using kernels::kLinearWarps;

// Input row r of p into xs[r][0..k) as bf16, RMS-normalised in float32 when
// asked (the same expression as AddRmsNormKernel), and the rows' unit sums
// into x_sums (awq_blocks.cuh). Every thread of the CTA takes part: a thread
// loads its own elements (one round trip for k <= 4 x 1,024), the sums of
// squares meet in shared memory; one warp looping over the row was the
// longest chain of this kernel at batch 1 (~10 us for 3 - 5 MB of nibbles
// in the 21B-A3B's attention). The caller synchronises before reading xs.
template <int kScaleHalves>
__device__ void StageInputRows(const DecodeLinearParams& p, __nv_bfloat16* xs, float* x_sums) {
  constexpr int kThreads = 32 * kLinearWarps;
  __shared__ float partial[kLinearWarps];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, quads = p.k / 4;
  for (int r = 0; r < p.m; ++r) {
    const int64_t src = p.row_index != nullptr ? p.row_index[r] : r;
    float scale = 1.0f;
    if (p.norm_weight != nullptr) {  // float32 input (checked at launch)
      const auto* in = reinterpret_cast<const float4*>(p.x_f32 + src * p.k);
      float sum_sq = 0.0f;
#pragma unroll 4
      for (int q = threadIdx.x; q < quads; q += kThreads) {
        const float4 v = in[q];
        sum_sq += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
      }
      sum_sq = kernels::WarpSum(sum_sq);
      if (lane == 0) partial[warp] = sum_sq;
      __syncthreads();
      float total = 0.0f;
#pragma unroll
      for (int w = 0; w < kLinearWarps; ++w) total += partial[w];
      scale = rsqrtf(total / static_cast<float>(p.k) + p.eps);
      __syncthreads();  // partial is the next row's
    }
    // Whole warps each pass (the unit sums shuffle across lanes).
    for (int base = 0; base < quads; base += kThreads) {
      const int q = base + threadIdx.x;
      const bool valid = q < quads;
      uint2 out = make_uint2(0, 0);
      if (valid && p.x_bf16 != nullptr) {
        out = reinterpret_cast<const uint2*>(p.x_bf16 + src * p.k)[q];
      } else if (valid) {
        const float4 v = reinterpret_cast<const float4*>(p.x_f32 + src * p.k)[q];
        float o[4] = {v.x, v.y, v.z, v.w};
        if (p.norm_weight != nullptr) {
          const float4 w = reinterpret_cast<const float4*>(p.norm_weight)[q];
          o[0] = w.x * (o[0] * scale);
          o[1] = w.y * (o[1] * scale);
          o[2] = w.z * (o[2] * scale);
          o[3] = w.w * (o[3] * scale);
        }
        const __nv_bfloat162 lo = __floats2bfloat162_rn(o[0], o[1]), hi = __floats2bfloat162_rn(o[2], o[3]);
        out = make_uint2(*reinterpret_cast<const uint32_t*>(&lo), *reinterpret_cast<const uint32_t*>(&hi));
      }
      if (valid) reinterpret_cast<uint2*>(xs + int64_t{r} * p.k)[q] = out;
      // The sum of the bf16 values the mmas will read.
      const float2 lo = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&out.x));
      const float2 hi = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&out.y));
      kernels::StoreAwqUnitSum<8 * kScaleHalves>(lo.x + lo.y + hi.x + hi.y, valid, r, q, x_sums);
    }
  }
  kernels::ZeroAwqUnitSums<kScaleHalves>(p.m, p.k, x_sums);
}

// Dynamic shared memory of the kernel: m input rows and their unit sums.
int64_t StagedBytes(int64_t m, int64_t k, int scale_halves) {
  return int64_t{sizeof(__nv_bfloat16)} * m * k + kernels::AwqXSumsBytes(k, scale_halves);
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

// The router's columns of a records launch's CTA (kRecords only), in shared memory.
__device__ __forceinline__ kernels::RouterColumns& StagedRouterColumns() {
  __shared__ kernels::RouterColumns columns;
  return columns;
}

// kWholeChunks: k a multiple of kAwqChunkK (awq_blocks.cuh's AwqComputeChunk).
// kRecords: kAddResidual at m = 1 writing the router records
// (DecodeLinearParams::router_records), launched in clusters; its own
// instantiation, so the other launches run the kernel as before.
template <int kScaleHalves, bool kWholeChunks, bool kRecords = false>
__global__ void __launch_bounds__(32 * kLinearWarps, kScaleHalves == 4 ? 2 : 1)
    AwqDecodeLinearKernel(DecodeLinearParams p, AwqWeightsView w, int k_slices, int group_shift) {
  if constexpr (kRecords) kernels::ClusterArrive();  // waited for before the records' remote stores
  kernels::AllowDependentLaunch();   // launched as a dependent: see LaunchDependent
  if (!kRecords && p.epilogue == DecodeEpilogue::kRotaryKv) kernels::PrefetchEarlierKv(p.rotary);
  extern __shared__ uint4 xs_raw[];  // [m, k] bf16 input rows
  __shared__ float red[kLinearWarps * 16 * 8];
  auto* xs = reinterpret_cast<__nv_bfloat16*>(xs_raw);
  const int warp = threadIdx.x / 32, g = threadIdx.x % 32 / 4;
  const int tiles_per_cta = kernels::DivBySlices(kLinearWarps, k_slices), slice = warp & (k_slices - 1);
  const int64_t tile = TileOf(p, kernels::DivBySlices(warp, k_slices), tiles_per_cta);
  const int k = p.k, groups2 = kernels::AwqRecordGroups2(k, group_shift);
  float* x_sums = reinterpret_cast<float*>(xs + int64_t{p.m} * k);  // 16-byte aligned: k % 64 == 0
  const int rows_of_cta = 16 * tiles_per_cta;
  // kRecords: the router's columns of this CTA's rows, copied now into shared
  // memory where they fit, else asked of the L2.
  const int64_t cta_row0 = int64_t{blockIdx.x} * rows_of_cta;
  const int live_rows = static_cast<int>(min(int64_t{rows_of_cta}, p.n - cta_row0));
  const bool columns_staged = rows_of_cta <= kernels::kRouterColumnsMaxRows;
  if constexpr (kRecords) {
    if (columns_staged)
      kernels::CopyRouterColumns(p.router_records, cta_row0, live_rows, StagedRouterColumns());
    else if (threadIdx.x == 0)
      kernels::PrefetchRouterColumns(p.router_records, cta_row0, rows_of_cta);
  }
  const __nv_bfloat16* x_row[1] = {g < p.m ? xs + int64_t{g} * k : nullptr};
  float acc[1][4] = {};
  kernels::AwqAccumulateSlice<1, kScaleHalves, true, kernels::kAwqChunksInFlight<1>, kWholeChunks>(
      w.packed + tile * (k / kAwqBlockK) * 32 * 4, w.records + tile * 8 * groups2 * 2, x_row, xs, x_sums, 1, k,
      group_shift, slice, k_slices, acc, [&] {
        StageInputRows<kScaleHalves>(p, xs, x_sums);
        __syncthreads();
      });
  kernels::StageAccumulators<1>(acc, red);

  __shared__ float residual_rows[kRecords ? 16 * kLinearWarps : 1];  // kRecords: this CTA's rows of y, final
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
        if constexpr (kRecords) residual_rows[r] = out;  // (m = 1)
      }
      if constexpr (kRecords) {
        kernels::CpAsyncWait<0>();  // the router's columns (long landed)
        __syncthreads();
        kernels::WriteRouterRecord<32 * kLinearWarps>(p.router_records, residual_rows, cta_row0, live_rows,
                                                      columns_staged ? &StagedRouterColumns() : nullptr);
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
        p.y[int64_t{m} * width + feature] = kernels::Silu(gate) * up;
      }
      break;
    }
    case DecodeEpilogue::kRotaryKv:
      for (int i = threadIdx.x; i < rows_of_cta / 2 * p.m; i += blockDim.x) {
        const int r = 2 * (i % (rows_of_cta / 2)), m = i / (rows_of_cta / 2);
        const int64_t a = int64_t{blockIdx.x} * rows_of_cta + r;
        if (a >= p.n) continue;
        kernels::RotaryKvStore(p.rotary, p.y, p.n, m, a, kernels::StagedRowSum<1>(red, k_slices, r, m) + bias(a),
                               kernels::StagedRowSum<1>(red, k_slices, r + 1, m) + bias(a + 1));
      }
      break;
  }
}

// A launch's k split and CTAs (the records' count follows from them).
struct LaunchShape {
  int k_slices = 1;
  int64_t ctas = 0;
};
template <int kScaleHalves, bool kWholeChunks, bool kRecords>
LaunchShape ShapeOf(const DecodeLinearParams& p, cudaError_t* error) {
  constexpr auto kernel = AwqDecodeLinearKernel<kScaleHalves, kWholeChunks, kRecords>;
  const int64_t resident = kernels::ResidentCtas<kernel>(error);
  const bool silu = p.epilogue == DecodeEpilogue::kSiluMul;
  const int64_t row_tiles = (int64_t{p.n} + 15) / 16;
  // SiLU pairs a gate tile with its up tile in one CTA: at least two tiles a CTA.
  int k_slices = kernels::PickKSlices(row_tiles, kernels::AwqChunks(p.k), resident);
  if (silu) k_slices = std::min(k_slices, kLinearWarps / 2);
  const int64_t tiles_per_cta = kLinearWarps / k_slices;
  const int64_t ctas = silu ? (row_tiles / 2 + tiles_per_cta / 2 - 1) / (tiles_per_cta / 2)
                            : (row_tiles + tiles_per_cta - 1) / tiles_per_cta;
  return {k_slices, ctas};
}

// The records launch's cluster: the largest power of two up to
// MoeRouterRecords::record_cluster that divides the CTAs.
int RecordClusterSize(int64_t ctas, const MoeRouterRecords& q) {
  int size = 1;
  while (2 * size <= q.record_cluster) size *= 2;
  while (ctas % size != 0) size /= 2;
  return size;
}

template <int kScaleHalves, bool kWholeChunks, bool kRecords = false>
cudaError_t Launch(const DecodeLinearParams& p, const AwqWeightsView& w, int group_shift, cudaStream_t stream) {
  constexpr auto kernel = AwqDecodeLinearKernel<kScaleHalves, kWholeChunks, kRecords>;
  const auto shared = static_cast<size_t>(StagedBytes(p.m, p.k, kScaleHalves));
  cudaError_t error = cudaSuccess;
  const LaunchShape shape = ShapeOf<kScaleHalves, kWholeChunks, kRecords>(p, &error);
  if (error != cudaSuccess) return error;
  if constexpr (kRecords) {
    const int cluster = RecordClusterSize(shape.ctas, p.router_records);
    if (p.router_records.count != shape.ctas / cluster) return cudaErrorInvalidValue;
    return kernels::LaunchDependentInClusters(kernel, dim3(static_cast<unsigned>(shape.ctas)), dim3(32 * kLinearWarps),
                                              shared, stream, static_cast<unsigned>(cluster), p, w, shape.k_slices,
                                              group_shift);
  }
  return kernels::LaunchDependent(kernel, dim3(static_cast<unsigned>(shape.ctas)), dim3(32 * kLinearWarps), shared,
                                  stream, p, w, shape.k_slices, group_shift);
}

template <bool kRecords>
cudaError_t LaunchFor(const DecodeLinearParams& p, const AwqWeightsView& w, int group_shift, cudaStream_t stream) {
  const bool whole_chunks = kernels::AwqWholeChunks(p.k);
  if (kernels::AwqScaleHalves(w.group_size) == 4)
    return whole_chunks ? Launch<4, true, kRecords>(p, w, group_shift, stream)
                        : Launch<4, false, kRecords>(p, w, group_shift, stream);
  return whole_chunks ? Launch<1, true, kRecords>(p, w, group_shift, stream)
                      : Launch<1, false, kRecords>(p, w, group_shift, stream);
}


}  // namespace

cudaError_t PrepareAwqDecodeLinear(int32_t max_k, int32_t max_rows) {
  if (max_k <= 0 || max_rows < 0 || max_rows > kDecodeLinearMaxRows) return cudaErrorInvalidValue;
  const auto bytes = static_cast<int>(StagedBytes(max_rows, max_k, 1));  // group < 128: the most unit sums
  cudaError_t e = cudaSuccess;
  for (const auto kernel : {AwqDecodeLinearKernel<1, false>, AwqDecodeLinearKernel<4, false>,
                            AwqDecodeLinearKernel<1, true>, AwqDecodeLinearKernel<4, true>,
                            AwqDecodeLinearKernel<1, false, true>, AwqDecodeLinearKernel<4, false, true>,
                            AwqDecodeLinearKernel<1, true, true>, AwqDecodeLinearKernel<4, true, true>})
    if (e == cudaSuccess) e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
  // The records launches' clusters may be of 16 CTAs (MoeRouterRecords::record_cluster).
  for (const auto kernel : {AwqDecodeLinearKernel<1, false, true>, AwqDecodeLinearKernel<4, false, true>,
                            AwqDecodeLinearKernel<1, true, true>, AwqDecodeLinearKernel<4, true, true>})
    if (e == cudaSuccess) e = cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
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
  if (p.router_records.on()) {
    const MoeRouterRecords& q = p.router_records;
    if (p.m != 1 || p.epilogue != DecodeEpilogue::kAddResidual || !MoeRouterRecordsValid(q) || q.hidden != p.n ||
        q.x != p.y)
      return cudaErrorInvalidValue;
    return LaunchFor<true>(p, w, group_shift, stream);
  }
  return LaunchFor<false>(p, w, group_shift, stream);
}

bool AwqDecodeLinearRunsRecordClusters(int32_t cluster, int32_t k, cudaError_t* error) {
  // The records kernel with the most shared memory (groups below 128: the most unit sums) at one row.
  constexpr auto kernel = AwqDecodeLinearKernel<1, false, true>;
  cudaLaunchAttribute attrs[2];
  const cudaLaunchConfig_t config = kernels::DependentClusterConfig(
      dim3(static_cast<unsigned>(cluster)), dim3(32 * kLinearWarps), static_cast<size_t>(StagedBytes(1, k, 1)),
      nullptr, static_cast<unsigned>(cluster), attrs);
  int clusters = 0;
  *error = cudaOccupancyMaxActiveClusters(&clusters, kernel, &config);
  return *error == cudaSuccess && clusters > 0;
}

int32_t AwqDecodeLinearRouterRecords(const DecodeLinearParams& p, const AwqWeightsView& w, cudaError_t* error) {
  const bool whole_chunks = kernels::AwqWholeChunks(p.k);
  const bool halves4 = kernels::AwqScaleHalves(w.group_size) == 4;
  const LaunchShape shape =
      halves4 ? (whole_chunks ? ShapeOf<4, true, true>(p, error) : ShapeOf<4, false, true>(p, error))
              : (whole_chunks ? ShapeOf<1, true, true>(p, error) : ShapeOf<1, false, true>(p, error));
  return static_cast<int32_t>(shape.ctas / RecordClusterSize(shape.ctas, p.router_records));
}

}  // namespace ernie::cuda

// The cluster decode linear (see cluster_decode_linear.h).
//
// Fragments as in linear_mma.cuh ("swap AB": the weight rows are mma's A
// operand, the input rows its B operand). Per 32-k step a lane holds 16
// bytes of weight rows g and g + 8 at k = 8c .. 8c + 7 and reads 16 bytes of
// input row g at the same k, and the two mma k-steps take
//   step e, slots (2c, 2c+1):   k 8c + 4e + {0, 1}
//   step e, slots (2c+8, 2c+9): k 8c + 4e + {2, 3}
// as awq_blocks.cuh's loop does.
#include <cooperative_groups.h>

#include <algorithm>

#include "engine/backend/cuda/kernels/cluster_decode_linear.h"
#include "engine/backend/cuda/kernels/common.cuh"
#include "engine/backend/cuda/kernels/decode_epilogue.cuh"
#include "engine/backend/cuda/kernels/linear_mma.cuh"

namespace ernie::cuda {

namespace {

namespace cg = cooperative_groups;
using kernels::PackBf16x2;

constexpr int kWarps = 8;
constexpr int kThreads = 32 * kWarps;
constexpr int kSliceK = 256;    // k of one CTA
constexpr int kMaxSlices = 16;  // CTAs of a cluster (more than 8 is a non-portable size)
// A staged bf16 row is kSliceK + 8 long, so the 8 rows a mma's lanes read
// at once start 16 bytes further along the banks and do not conflict.
constexpr int kXStride = kSliceK + 8;

// kHalves 2: a CTA of 64 weight rows, warp w on row tile w % 4 and half
// w / 4 of the slice; kHalves 1: 128 rows, warp w on tile w, the whole slice
// (for wide layers, whose 64-row CTAs would not fit one wave).
template <int kHalves>
constexpr int kCtaRows = 128 / kHalves;
// Floats between two input rows' partial sums ([half][x row][weight row]):
// consecutive threads of the reduction read consecutive weight rows (no
// bank conflicts; the first layout, [weight row][x row], made every remote
// read a 32-way conflict: 47 us a launch at 64 rows, ncu v12), and the 4
// extra floats put the mma lanes' writes (x rows 2c apart) on distinct banks.
template <int kHalves>
constexpr int kPartialStride = kCtaRows<kHalves> + 4;

// Shared memory for rows = 8 x_tiles input rows: a float32 region (the
// float32 input slice, later the CTA's partial sums [kHalves][rows of x]
// [kPartialStride], which are never larger), the bf16 slice, the slice's
// sums of squares and the rows' 1 / rms.
constexpr int64_t StageBytes(int rows) { return int64_t{rows} * kSliceK * 4; }
constexpr int64_t SharedBytes(int rows) {
  return StageBytes(rows) + int64_t{rows} * kXStride * 2 + int64_t{rows} * 4 * 2;
}

// Global weight row of local row l of row group `group`. kSiluMul: the
// first half of the CTA's rows are gate rows, the second half the matching up rows.
__device__ __forceinline__ int64_t WeightRow(const DecodeLinearParams& p, int64_t group, int l, int cta_rows) {
  if (p.epilogue != DecodeEpilogue::kSiluMul) return group * cta_rows + l;
  const int half = cta_rows / 2;
  const int64_t feature = group * half + l % half;
  return l < half ? feature : p.n / 2 + feature;
}

template <int kXTiles, int kHalves>
__global__ void __launch_bounds__(kThreads, 2) ClusterDecodeLinearKernel(DecodeLinearParams p, int slices) {
  constexpr int kRowsX = 8 * kXTiles;
  constexpr int kRowsW = kCtaRows<kHalves>;
  constexpr int kWarpK = kSliceK / kHalves;
  constexpr int kSteps = kWarpK / 32;
  extern __shared__ __align__(16) unsigned char smem[];
  auto* stage = reinterpret_cast<float*>(smem);
  auto* xs = reinterpret_cast<__nv_bfloat16*>(smem + StageBytes(kRowsX));
  auto* sum_sq = reinterpret_cast<float*>(xs + kRowsX * kXStride);
  float* inv_rms = sum_sq + kRowsX;

  // A programmatic dependent: the weights never depend on the kernels
  // before, so they load while those finish; the input waits for them.
  kernels::AllowDependentLaunch();
  cg::cluster_group cluster = cg::this_cluster();
  const int rank = static_cast<int>(cluster.block_rank());
  const int64_t group = blockIdx.x / slices;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, c = lane % 4;
  const int tile = warp % (kRowsW / 16), half = warp / (kRowsW / 16);
  const int k0 = rank * kSliceK;

  uint4 wa[kSteps], wb[kSteps];  // rows g and g + 8 of the warp's tile
  {
    const int64_t at = k0 + half * kWarpK + 8 * c;
    const __nv_bfloat16* ra = p.w + WeightRow(p, group, 16 * tile + g, kRowsW) * p.k + at;
    const __nv_bfloat16* rb = p.w + WeightRow(p, group, 16 * tile + g + 8, kRowsW) * p.k + at;
#pragma unroll
    for (int s = 0; s < kSteps; ++s) {
      wa[s] = kernels::LoadStreaming16(ra + 32 * s);
      wb[s] = kernels::LoadStreaming16(rb + 32 * s);
    }
  }
  // The norm weight of the 8 columns of the slice this lane converts below.
  const bool norm = p.norm_weight != nullptr;
  float4 norm_lo = make_float4(1.0f, 1.0f, 1.0f, 1.0f), norm_hi = norm_lo;
  if (norm) {
    norm_lo = __ldg(reinterpret_cast<const float4*>(p.norm_weight + k0 + 8 * lane));
    norm_hi = __ldg(reinterpret_cast<const float4*>(p.norm_weight + k0 + 8 * lane + 4));
  }

  kernels::WaitForPrerequisiteGrids();
  // The slice of the input rows, 16-byte copies all in flight at once:
  // float32 rows into the stage (converted below), bf16 rows straight to xs.
  // Rows m .. kRowsX - 1 stay as they are: column j of an mma's result
  // depends on input row j alone, and those columns are never stored.
  const bool f32_input = p.x_f32 != nullptr;
  const int pieces = f32_input ? kSliceK / 4 : kSliceK / 8;
  for (int i = threadIdx.x; i < p.m * pieces; i += kThreads) {
    const int r = i / pieces, piece = i % pieces;
    const int64_t src = p.row_index != nullptr ? p.row_index[r] : r;
    if (f32_input) {
      kernels::CpAsync16(stage + r * kSliceK + 4 * piece, p.x_f32 + src * p.k + k0 + 4 * piece);
    } else {
      kernels::CpAsync16(xs + r * kXStride + 8 * piece, p.x_bf16 + src * p.k + k0 + 8 * piece);
    }
  }
  kernels::CpAsyncCommit();
  kernels::CpAsyncWait<0>();
  __syncthreads();
  if (f32_input) {
    // A warp a row, a lane 8 columns: bf16(g x), and the slice's sum of
    // squares of x (the norm is applied to the sums: header).
    for (int r = warp; r < p.m; r += kWarps) {
      const float4 a = *reinterpret_cast<const float4*>(stage + r * kSliceK + 8 * lane);
      const float4 b = *reinterpret_cast<const float4*>(stage + r * kSliceK + 8 * lane + 4);
      if (norm) {
        const float ss = kernels::WarpSum(a.x * a.x + a.y * a.y + a.z * a.z + a.w * a.w + b.x * b.x + b.y * b.y +
                                          b.z * b.z + b.w * b.w);
        if (lane == 0) sum_sq[r] = ss;
      }
      *reinterpret_cast<uint4*>(xs + r * kXStride + 8 * lane) =
          make_uint4(PackBf16x2(norm_lo.x * a.x, norm_lo.y * a.y), PackBf16x2(norm_lo.z * a.z, norm_lo.w * a.w),
                     PackBf16x2(norm_hi.x * b.x, norm_hi.y * b.y), PackBf16x2(norm_hi.z * b.z, norm_hi.w * b.w));
    }
    __syncthreads();
  }

  float acc[kXTiles][4] = {};
  const __nv_bfloat16* x_lane = xs + g * kXStride + half * kWarpK + 8 * c;
#pragma unroll
  for (int s = 0; s < kSteps; ++s) {
    const uint32_t a0[4] = {wa[s].x, wb[s].x, wa[s].y, wb[s].y};
    const uint32_t a1[4] = {wa[s].z, wb[s].z, wa[s].w, wb[s].w};
#pragma unroll
    for (int t = 0; t < kXTiles; ++t) {
      const uint4 xv = *reinterpret_cast<const uint4*>(x_lane + 8 * t * kXStride + 32 * s);
      kernels::MmaBf16(acc[t], a0, xv.x, xv.y);
      kernels::MmaBf16(acc[t], a1, xv.z, xv.w);
    }
  }

  // The partial sums into the float32 region (no warp reads the stage any
  // more: the conversion ended with a barrier), [half][x row][weight row].
  constexpr int kStride = kPartialStride<kHalves>;
  static_assert(kHalves * kStride <= kSliceK, "the partial sums fit the float32 region");
  float* partial = stage;
#pragma unroll
  for (int t = 0; t < kXTiles; ++t) {
    float* col0 = partial + (half * kRowsX + 8 * t + 2 * c) * kStride + 16 * tile + g;  // x row 8t + 2c
    float* col1 = col0 + kStride;                                                        // x row 8t + 2c + 1
    col0[0] = acc[t][0];
    col1[0] = acc[t][1];
    col0[8] = acc[t][2];
    col1[8] = acc[t][3];
  }
  cluster.sync();  // every CTA's partials and sums of squares, visible to the cluster

  if (norm) {
    for (int r = threadIdx.x; r < p.m; r += kThreads) {
      float part[kMaxSlices];  // loads issued together, then summed in rank order
#pragma unroll
      for (int s = 0; s < kMaxSlices; ++s) part[s] = s < slices ? cluster.map_shared_rank(sum_sq, s)[r] : 0.0f;
      float total = 0.0f;
#pragma unroll
      for (int s = 0; s < kMaxSlices; ++s) total += part[s];
      // The same expression as AddRmsNormKernel's scale.
      inv_rms[r] = rsqrtf(total / static_cast<float>(p.k) + p.eps);
    }
  }
  __syncthreads();

  // Local row l's full sum for input row `col`: the slices' partials in rank
  // order (their loads issued together), times the row's 1 / rms.
  auto full_sum = [&](int l, int col) {
    float v[kMaxSlices][kHalves];
#pragma unroll
    for (int s = 0; s < kMaxSlices; ++s) {
      if (s >= slices) break;
      const float* remote = cluster.map_shared_rank(partial, s);
#pragma unroll
      for (int h = 0; h < kHalves; ++h) v[s][h] = remote[(h * kRowsX + col) * kStride + l];
    }
    float sum = 0.0f;
#pragma unroll
    for (int s = 0; s < kMaxSlices; ++s) {
      if (s >= slices) break;
#pragma unroll
      for (int h = 0; h < kHalves; ++h) sum += v[s][h];
    }
    return norm ? sum * inv_rms[col] : sum;
  };
  auto bias = [&](int64_t row) { return p.bias != nullptr ? p.bias[row] : 0.0f; };

  // The cluster's outputs split evenly over its CTAs; consecutive threads
  // take consecutive weight rows of one input row (coalesced stores).
  const bool pairs = p.epilogue == DecodeEpilogue::kSiluMul || p.epilogue == DecodeEpilogue::kRotaryKv;
  const int units = pairs ? kRowsW / 2 : kRowsW;
  const int items = units * p.m, per_cta = (items + slices - 1) / slices;
  const int last = min(items, (rank + 1) * per_cta);
  for (int i = rank * per_cta + threadIdx.x; i < last; i += kThreads) {
    const int col = i / units, u = i % units;
    switch (p.epilogue) {
      case DecodeEpilogue::kStore:
      case DecodeEpilogue::kAddResidual: {
        const int64_t row = group * kRowsW + u;
        const float v = full_sum(u, col) + bias(row);
        float& out = p.y[int64_t{col} * p.n + row];
        out = p.epilogue == DecodeEpilogue::kStore ? v : out + v;
        break;
      }
      case DecodeEpilogue::kSiluMul: {
        const int64_t width = p.n / 2, feature = group * units + u;
        const float gate = full_sum(u, col) + bias(feature);
        const float up = full_sum(units + u, col) + bias(width + feature);
        p.y[int64_t{col} * width + feature] = kernels::Silu(gate) * up;
        break;
      }
      case DecodeEpilogue::kRotaryKv: {
        const int64_t a = group * kRowsW + 2 * u;
        kernels::RotaryKvStore(p.rotary, p.y, p.n, col, a, full_sum(2 * u, col) + bias(a),
                               full_sum(2 * u + 1, col) + bias(a + 1));
        break;
      }
    }
  }
  cluster.sync();  // no CTA leaves while another still reads its shared memory
}

using KernelFn = void (*)(DecodeLinearParams, int);

template <int kHalves>
KernelFn KernelFor(int x_tiles) {
  switch (x_tiles) {
    case 1: return ClusterDecodeLinearKernel<1, kHalves>;
    case 2: return ClusterDecodeLinearKernel<2, kHalves>;
    case 3: return ClusterDecodeLinearKernel<3, kHalves>;
    case 4: return ClusterDecodeLinearKernel<4, kHalves>;
    case 5: return ClusterDecodeLinearKernel<5, kHalves>;
    case 6: return ClusterDecodeLinearKernel<6, kHalves>;
    case 7: return ClusterDecodeLinearKernel<7, kHalves>;
    default: return ClusterDecodeLinearKernel<8, kHalves>;
  }
}

// Row groups of a CTA of `cta_rows` weight rows, or 0 when they do not divide
// the layer (kSiluMul: each group is cta_rows / 2 gate rows and their up rows).
int64_t RowGroups(int32_t n, DecodeEpilogue epilogue, int cta_rows) {
  const bool silu = epilogue == DecodeEpilogue::kSiluMul;
  if (silu && n % 2 != 0) return 0;
  const int64_t rows = silu ? n / 2 : n, per_group = silu ? cta_rows / 2 : cta_rows;
  return rows % per_group == 0 ? rows / per_group : 0;
}

int SmCount(cudaError_t* error) {
  static const int sms = [] {
    int device = 0, count = 0;
    if (cudaGetDevice(&device) != cudaSuccess ||
        cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device) != cudaSuccess)
      return 0;
    return count;
  }();
  *error = sms > 0 ? cudaSuccess : cudaErrorInvalidDevice;
  return sms;
}

}  // namespace

bool ClusterDecodeLinearSupports(int32_t n, int32_t k, DecodeEpilogue epilogue) {
  return n > 0 && k > 0 && k % kSliceK == 0 && k / kSliceK <= kMaxSlices && RowGroups(n, epilogue, 64) > 0;
}

cudaError_t PrepareClusterDecodeLinear() {
  const auto bytes = static_cast<int>(SharedBytes(kClusterDecodeLinearMaxRows));
  for (int x_tiles = 1; x_tiles <= kClusterDecodeLinearMaxRows / 8; ++x_tiles) {
    for (KernelFn kernel : {KernelFor<1>(x_tiles), KernelFor<2>(x_tiles)}) {
      cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
      if (e == cudaSuccess) e = cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
      if (e != cudaSuccess) return e;
    }
  }
  return cudaSuccess;
}

cudaError_t LaunchClusterDecodeLinear(const DecodeLinearParams& p, cudaStream_t stream) {
  const bool one_input = (p.x_f32 != nullptr) != (p.x_bf16 != nullptr);
  if (!one_input || p.router_records.on() ||  // router records: the int4 kernel's only
      p.w == nullptr || p.y == nullptr || p.m < 1 || p.m > kClusterDecodeLinearMaxRows ||
      !ClusterDecodeLinearSupports(p.n, p.k, p.epilogue) || (p.norm_weight != nullptr && p.x_f32 == nullptr))
    return cudaErrorInvalidValue;
  if (!kernels::Aligned16(p.w) || (p.x_f32 != nullptr && !kernels::Aligned16(p.x_f32)) ||
      (p.x_bf16 != nullptr && !kernels::Aligned16(p.x_bf16)) ||
      (p.norm_weight != nullptr && !kernels::Aligned16(p.norm_weight)))
    return cudaErrorInvalidValue;
  if (p.epilogue == DecodeEpilogue::kRotaryKv && !RotaryKvParamsValid(p)) return cudaErrorInvalidValue;
  cudaError_t error = cudaSuccess;
  const int sms = SmCount(&error);
  if (error != cudaSuccess) return error;
  const int slices = p.k / kSliceK;
  // 64-row CTAs (two warps a tile, more CTAs) unless they would not fit
  // one wave of two CTAs an SM and 128-row ones divide the layer.
  const int64_t groups64 = RowGroups(p.n, p.epilogue, 64), groups128 = RowGroups(p.n, p.epilogue, 128);
  const bool wide = groups64 * slices > 2 * int64_t{sms} && groups128 > 0;
  const int x_tiles = (p.m + 7) / 8;
  return kernels::LaunchDependentInClusters(wide ? KernelFor<1>(x_tiles) : KernelFor<2>(x_tiles),
                                            dim3(static_cast<unsigned>((wide ? groups128 : groups64) * slices)),
                                            dim3(kThreads), static_cast<size_t>(SharedBytes(8 * x_tiles)), stream,
                                            static_cast<unsigned>(slices), p, slices);
}

}  // namespace ernie::cuda

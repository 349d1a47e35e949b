// The row-wise kernels. Each thread issues every load it needs before any
// arithmetic (float4s held in registers), so a kernel costs one round trip
// to memory: the first versions looped over a row with a load, a compute
// and a store per iteration, and since their pointers may alias, every
// iteration waited a full round trip (ncu, 0.3b at batch 64 with warm
// caches: 4.2 us an RMSNorm and 5.5 us a SiLU-and-mul, moving no DRAM bytes;
// NOTES.md v12). They launch as programmatic dependents: the norm weights
// and biases, which no kernel writes, load before the wait for the kernel
// before. Rows whose width is not a multiple of 4 (or unaligned pointers,
// or rows too wide to hold) take the plain loops.
#include "engine/backend/cuda/kernels/common.cuh"
#include "engine/backend/cuda/kernels/elementwise.h"

namespace ernie::cuda {

namespace {

constexpr int kThreads = 256;
// Float4s of a row one thread holds, at most: rows of up to 256 x 4 x 8 = 8,192 floats.
constexpr int kMaxRowQuads = 8;

__device__ __forceinline__ float4 Add4(float4 a, float4 b) {
  return make_float4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w);
}

__global__ void EmbeddingGatherKernel(const __nv_bfloat16* table, const int32_t* ids, int32_t hidden, float* x) {
  const int64_t t = blockIdx.x;
  const __nv_bfloat16* row = table + int64_t{ids[t]} * hidden;
  float* dst = x + t * hidden;
  for (int i = threadIdx.x; i < hidden; i += blockDim.x) dst[i] = __bfloat162float(row[i]);
}

// One block per output row, the row held in registers (hidden % 4 == 0,
// hidden <= 4 kThreads kRowQuads, 16-byte aligned rows). kRowQuads is the
// fewest that hold the row: registers beyond it would only cost occupancy.
template <int kRowQuads>
__global__ void __launch_bounds__(kThreads) AddRmsNormRowKernel(AddRmsNormParams p) {
  __shared__ float scratch[32];
  kernels::AllowDependentLaunch();
  const int quads = p.hidden / 4;
  float4 w[kRowQuads], bias[kRowQuads];
#pragma unroll
  for (int u = 0; u < kRowQuads; ++u) {
    const int q = threadIdx.x + u * kThreads;
    const bool in = q < quads;
    w[u] = in ? __ldg(reinterpret_cast<const float4*>(p.weight) + q) : make_float4(0, 0, 0, 0);
    bias[u] = in && p.delta_bias != nullptr ? __ldg(reinterpret_cast<const float4*>(p.delta_bias) + q)
                                            : make_float4(0, 0, 0, 0);
  }
  kernels::WaitForPrerequisiteGrids();  // x and delta are the kernels before's
  const int64_t r = blockIdx.x;
  const int64_t t = p.row_index != nullptr ? p.row_index[r] : r;
  auto* x = reinterpret_cast<float4*>(p.x + t * p.hidden);
  const auto* delta = p.delta != nullptr ? reinterpret_cast<const float4*>(p.delta + t * p.hidden) : nullptr;
  float4 v[kRowQuads], d[kRowQuads];
#pragma unroll
  for (int u = 0; u < kRowQuads; ++u) {
    const int q = threadIdx.x + u * kThreads;
    v[u] = q < quads ? x[q] : make_float4(0, 0, 0, 0);
    d[u] = q < quads && delta != nullptr ? delta[q] : make_float4(0, 0, 0, 0);
  }
  float sum = 0.0f;
#pragma unroll
  for (int u = 0; u < kRowQuads; ++u) {
    const int q = threadIdx.x + u * kThreads;
    if (delta != nullptr) v[u] = Add4(v[u], Add4(d[u], bias[u]));  // x + (delta + bias), as the loop below
    if (q < quads && delta != nullptr && p.write_residual) x[q] = v[u];
    sum += v[u].x * v[u].x + v[u].y * v[u].y + v[u].z * v[u].z + v[u].w * v[u].w;
  }
  sum = kernels::BlockSum(sum, scratch);
  const float scale = rsqrtf(sum / static_cast<float>(p.hidden) + p.eps);
  __nv_bfloat16* out = p.out + r * p.hidden;
#pragma unroll
  for (int u = 0; u < kRowQuads; ++u) {
    const int q = threadIdx.x + u * kThreads;
    if (q >= quads) break;
    kernels::StoreBf16x4(out + 4 * q, w[u].x * (v[u].x * scale), w[u].y * (v[u].y * scale),
                         w[u].z * (v[u].z * scale), w[u].w * (v[u].w * scale));
  }
}

// Any width: one block per output row, the row read twice (sum of squares,
// then the scaled write), the second time from L1/L2.
__global__ void AddRmsNormKernel(AddRmsNormParams p) {
  __shared__ float scratch[32];
  kernels::AllowDependentLaunch();
  kernels::WaitForPrerequisiteGrids();
  const int64_t r = blockIdx.x;
  const int64_t t = p.row_index != nullptr ? p.row_index[r] : r;
  float* x = p.x + t * p.hidden;
  const float* delta = p.delta != nullptr ? p.delta + t * p.hidden : nullptr;
  float sum = 0.0f;
  for (int i = threadIdx.x; i < p.hidden; i += blockDim.x) {
    float v = x[i];
    if (delta != nullptr) v += delta[i] + (p.delta_bias != nullptr ? p.delta_bias[i] : 0.0f);
    if (p.write_residual) x[i] = v;
    sum += v * v;
  }
  sum = kernels::BlockSum(sum, scratch);
  const float scale = rsqrtf(sum / static_cast<float>(p.hidden) + p.eps);
  __nv_bfloat16* out = p.out + r * p.hidden;
  for (int i = threadIdx.x; i < p.hidden; i += blockDim.x) {
    float v = x[i];
    if (delta != nullptr && !p.write_residual) v += delta[i] + (p.delta_bias != nullptr ? p.delta_bias[i] : 0.0f);
    out[i] = __float2bfloat16(p.weight[i] * (v * scale));
  }
}

using kernels::Silu;

// Element i of a row, and four from element 4q (aligned), as float.
__device__ __forceinline__ float ValueAt(const float* row, int64_t i) { return row[i]; }
__device__ __forceinline__ float ValueAt(const __nv_bfloat16* row, int64_t i) { return __bfloat162float(row[i]); }
__device__ __forceinline__ float4 QuadAt(const float* row, int64_t q) { return reinterpret_cast<const float4*>(row)[q]; }
__device__ __forceinline__ float4 QuadAt(const __nv_bfloat16* row, int64_t q) {
  const uint2 raw = reinterpret_cast<const uint2*>(row)[q];
  const float2 lo = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&raw.x));
  const float2 hi = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&raw.y));
  return make_float4(lo.x, lo.y, hi.x, hi.y);
}

// Four outputs a thread (intermediate % 4 == 0, aligned): grid (quads of a
// row / kThreads, tokens). T: float or bf16 gate_up.
template <typename T>
__global__ void __launch_bounds__(kThreads) SiluAndMulQuadKernel(const T* gate_up, const float* bias,
                                                                 int32_t intermediate, __nv_bfloat16* out) {
  kernels::AllowDependentLaunch();
  const int q = blockIdx.x * kThreads + threadIdx.x;
  const bool in = q < intermediate / 4;
  const auto* b4 = reinterpret_cast<const float4*>(bias);
  const float4 bg = in && bias != nullptr ? __ldg(b4 + q) : make_float4(0, 0, 0, 0);
  const float4 bu = in && bias != nullptr ? __ldg(b4 + intermediate / 4 + q) : make_float4(0, 0, 0, 0);
  kernels::WaitForPrerequisiteGrids();
  if (!in) return;
  const int64_t t = blockIdx.y;
  const T* row = gate_up + t * 2 * intermediate;
  const float4 g = Add4(QuadAt(row, q), bg), u = Add4(QuadAt(row, intermediate / 4 + q), bu);
  kernels::StoreBf16x4(out + t * intermediate + 4 * q, Silu(g.x) * u.x, Silu(g.y) * u.y, Silu(g.z) * u.z,
                       Silu(g.w) * u.w);
}

template <typename T>
__global__ void SiluAndMulKernel(const T* gate_up, const float* bias, int32_t intermediate, __nv_bfloat16* out) {
  kernels::AllowDependentLaunch();
  kernels::WaitForPrerequisiteGrids();
  const int64_t t = blockIdx.x;
  const T* gate = gate_up + t * 2 * intermediate;
  const T* up = gate + intermediate;
  for (int i = threadIdx.x; i < intermediate; i += blockDim.x) {
    const float g = ValueAt(gate, i) + (bias != nullptr ? bias[i] : 0.0f);
    const float u = ValueAt(up, i) + (bias != nullptr ? bias[intermediate + i] : 0.0f);
    out[t * intermediate + i] = __float2bfloat16(Silu(g) * u);
  }
}

}  // namespace

cudaError_t LaunchEmbeddingGather(const __nv_bfloat16* table, const int32_t* ids, int32_t tokens, int32_t hidden,
                                  float* x, cudaStream_t stream) {
  if (table == nullptr || ids == nullptr || x == nullptr || tokens <= 0 || hidden <= 0) return cudaErrorInvalidValue;
  EmbeddingGatherKernel<<<tokens, kThreads, 0, stream>>>(table, ids, hidden, x);
  return cudaGetLastError();
}

cudaError_t LaunchAddRmsNorm(const AddRmsNormParams& p, cudaStream_t stream) {
  if (p.x == nullptr || p.weight == nullptr || p.out == nullptr || p.rows <= 0 || p.hidden <= 0)
    return cudaErrorInvalidValue;
  if (p.row_index != nullptr && p.write_residual) return cudaErrorInvalidValue;  // gathered rows are read-only
  // out's rows are written 4 bf16 (8 bytes) at a time.
  const bool aligned = p.hidden % 4 == 0 && kernels::Aligned16(p.x) && kernels::Aligned16(p.weight) &&
                       (p.delta == nullptr || kernels::Aligned16(p.delta)) &&
                       (p.delta_bias == nullptr || kernels::Aligned16(p.delta_bias)) && kernels::AlignedTo(p.out, 8);
  const int quads_per_thread = (p.hidden / 4 + kThreads - 1) / kThreads;
  void (*kernel)(AddRmsNormParams) = AddRmsNormKernel;
  if (aligned && quads_per_thread <= 1) {
    kernel = AddRmsNormRowKernel<1>;
  } else if (aligned && quads_per_thread <= 2) {
    kernel = AddRmsNormRowKernel<2>;
  } else if (aligned && quads_per_thread <= 4) {
    kernel = AddRmsNormRowKernel<4>;
  } else if (aligned && quads_per_thread <= kMaxRowQuads) {
    kernel = AddRmsNormRowKernel<kMaxRowQuads>;
  }
  return kernels::LaunchDependent(kernel, dim3(static_cast<unsigned>(p.rows)), dim3(kThreads), 0, stream, p);
}

namespace {

template <typename T>
cudaError_t LaunchSiluAndMulOf(const T* gate_up, const float* bias, int32_t tokens, int32_t intermediate,
                               __nv_bfloat16* out, cudaStream_t stream) {
  if (gate_up == nullptr || out == nullptr || tokens <= 0 || intermediate <= 0) return cudaErrorInvalidValue;
  // A quad of T: 16 bytes of float, 8 of bf16.
  if (intermediate % 4 == 0 && kernels::AlignedTo(gate_up, 4 * sizeof(T)) &&
      (bias == nullptr || kernels::Aligned16(bias)) && kernels::AlignedTo(out, 8)) {
    const int quads = intermediate / 4;
    const dim3 grid(static_cast<unsigned>((quads + kThreads - 1) / kThreads), static_cast<unsigned>(tokens));
    return kernels::LaunchDependent(SiluAndMulQuadKernel<T>, grid, dim3(kThreads), 0, stream, gate_up, bias,
                                    intermediate, out);
  }
  return kernels::LaunchDependent(SiluAndMulKernel<T>, dim3(static_cast<unsigned>(tokens)), dim3(kThreads), 0, stream,
                                  gate_up, bias, intermediate, out);
}

}  // namespace

cudaError_t LaunchSiluAndMul(const float* gate_up, const float* bias, int32_t tokens, int32_t intermediate,
                             __nv_bfloat16* out, cudaStream_t stream) {
  return LaunchSiluAndMulOf(gate_up, bias, tokens, intermediate, out, stream);
}

cudaError_t LaunchSiluAndMul(const __nv_bfloat16* gate_up, const float* bias, int32_t tokens, int32_t intermediate,
                             __nv_bfloat16* out, cudaStream_t stream) {
  return LaunchSiluAndMulOf(gate_up, bias, tokens, intermediate, out, stream);
}

}  // namespace ernie::cuda

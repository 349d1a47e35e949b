#include <algorithm>

#include "engine/backend/cuda/kernels/common.cuh"
#include "engine/backend/cuda/kernels/decode_linear.h"
#include "engine/backend/cuda/kernels/decode_epilogue.cuh"

namespace ernie::cuda {

namespace {

constexpr int kWarps = 4;           // per CTA: small CTAs, so even n = 1024 spreads over the SMs
// 16-byte loads per weight row in one step of a warp's loop. The next step's
// loads are issued before this step's FMAs (double buffering), so a warp
// keeps one step of loads in flight all the time: without it each step waited
// a full memory latency, and a row of k = 2,560 took three of them (ncu, v9:
// the 21B-A3B's attention linears at 28% of HBM bandwidth).
constexpr int kChunksInFlight = 4;
constexpr int kLoopStepK = 32 * 8 * kChunksInFlight;  // k one step of a warp's loop covers
constexpr int kMaxCtas = 4096;      // beyond this, warps loop over further row pairs (lm_head)
static_assert(kWarps % 2 == 0, "k_halves 2 pairs a CTA's warps");

// Float4s of an input row a thread loads at once: six, so one pass covers
// k <= 3,072 (every linear of the 0.3b and the 21B-A3B's attention).
constexpr int kInputLoadsPerPass = 6;

// The norm weight of this thread's first pass, loaded before the kernel
// waits for the one before it (weights never depend on earlier kernels).
struct NormPrefetch {
  float4 w[kInputLoadsPerPass];
};
__device__ __forceinline__ void PrefetchNorm(const DecodeLinearParams& p, NormPrefetch& pre) {
  constexpr int kThreads = kWarps * 32;
  const auto* weight = reinterpret_cast<const float4*>(p.norm_weight);
#pragma unroll
  for (int u = 0; u < kInputLoadsPerPass; ++u) {
    const int q = threadIdx.x + u * kThreads;
    pre.w[u] = weight != nullptr && q < p.k / 4 ? __ldg(weight + q) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  }
}

__device__ __forceinline__ float4 InputQuad(const DecodeLinearParams& p, int64_t src, int q) {
  if (p.x_f32 != nullptr) return *reinterpret_cast<const float4*>(p.x_f32 + src * p.k + 4 * q);
  const uint2 raw = *reinterpret_cast<const uint2*>(p.x_bf16 + src * p.k + 4 * q);
  const float2 lo = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&raw.x));
  const float2 hi = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&raw.y));
  return make_float4(lo.x, lo.y, hi.x, hi.y);
}

// Input row r into xs[r][0..k) as float32, RMS-normalised when asked, by
// every thread of the CTA: a thread's loads of a row go out together
// (kInputLoadsPerPass float4s), the sums of squares meet in shared memory
// (`partial`), then each thread scales its own elements (the first pass's
// norm weight comes from `pre`). One warp a row, looping 32 elements at a
// time, made this the longest latency chain of the kernel at batch 1 (ncu
// put the 0.3b's linears at ~9 us for a 1.2 - 2.9 us floor).
template <int M>
__device__ void LoadInputRows(const DecodeLinearParams& p, const NormPrefetch& pre, float* xs, float (*partial)[M]) {
  constexpr int kThreads = kWarps * 32, kPass = kThreads * kInputLoadsPerPass;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int quads = p.k / 4;
  float sum_sq[M] = {};
#pragma unroll
  for (int r = 0; r < M; ++r) {
    const int64_t src = p.row_index != nullptr ? p.row_index[r] : r;
    auto* row = reinterpret_cast<float4*>(xs + r * p.k);
    for (int base = threadIdx.x; base < quads; base += kPass) {
      float4 v[kInputLoadsPerPass];
#pragma unroll
      for (int u = 0; u < kInputLoadsPerPass; ++u) {
        const int q = base + u * kThreads;
        v[u] = q < quads ? InputQuad(p, src, q) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      }
#pragma unroll
      for (int u = 0; u < kInputLoadsPerPass; ++u) {
        const int q = base + u * kThreads;
        if (q < quads) row[q] = v[u];
        sum_sq[r] += v[u].x * v[u].x + v[u].y * v[u].y + v[u].z * v[u].z + v[u].w * v[u].w;
      }
    }
  }
  if (p.norm_weight == nullptr) return;
#pragma unroll
  for (int r = 0; r < M; ++r) {
    const float s = kernels::WarpSum(sum_sq[r]);
    if (lane == 0) partial[warp][r] = s;
  }
  __syncthreads();
  float scale[M];
#pragma unroll
  for (int r = 0; r < M; ++r) {
    float s = 0.0f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) s += partial[w][r];
    // The same expression as AddRmsNormKernel: weight * (x * rsqrt(mean(x^2) + eps)).
    scale[r] = rsqrtf(s / static_cast<float>(p.k) + p.eps);
  }
  const auto* weight = reinterpret_cast<const float4*>(p.norm_weight);
  for (int base = threadIdx.x; base < quads; base += kPass) {
    float4 w[kInputLoadsPerPass];
#pragma unroll
    for (int u = 0; u < kInputLoadsPerPass; ++u) {
      const int q = base + u * kThreads;
      w[u] = base == threadIdx.x ? pre.w[u] : q < quads ? __ldg(weight + q) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    }
#pragma unroll
    for (int u = 0; u < kInputLoadsPerPass; ++u) {
      const int q = base + u * kThreads;
      if (q >= quads) break;
#pragma unroll
      for (int r = 0; r < M; ++r) {
        float4& x = reinterpret_cast<float4*>(xs + r * p.k)[q];  // this thread's own elements
        x = make_float4(w[u].x * (x.x * scale[r]), w[u].y * (x.y * scale[r]), w[u].z * (x.z * scale[r]),
                        w[u].w * (x.w * scale[r]));
      }
    }
  }
}

// Each warp owns a pair of weight rows (a, b): (2j, 2j + 1), or (j, width + j)
// for kSiluMul, and computes both dots for all M input rows.
//
// k_halves 2 (rows of k > 2 kLoopStepK, when twice the warps fit one wave):
// warps 2i and 2i + 1 of a CTA share a pair, each half of k, so every weight
// a warp reads is requested before the wait (a warp's two register buffers
// hold two loop steps); the second warp's dots meet the first's in shared
// memory. One warp walking k = 3,072 loaded its last step after the wait
// (the 0.3b's down_proj, the slowest linear of the batch-1 step, v19).
//
// kWholeSteps: k a multiple of kLoopStepK (the 0.3b's every linear), so each
// warp's range of k is whole loop steps (the halves split at a step: 3,072 as
// 2,048 + 1,024) and the loop has no partial step to test for.
template <int M, bool kWholeSteps>
__global__ void __launch_bounds__(kWarps * 32) DecodeLinearKernel(DecodeLinearParams p, int k_halves) {
  extern __shared__ float xs[];  // [M, k]
  __shared__ float row_sums[kWarps][M];
  __shared__ float half_dots[kWarps / 2][M][2];  // k_halves 2: the second warp's dots of each pair
  // Launched as a programmatic dependent (LaunchDecodeLinear): the weights do
  // not depend on earlier kernels, so the first chunks of this warp's rows
  // load while the kernel before still runs; the input waits for it.
  kernels::AllowDependentLaunch();
  const int lane = threadIdx.x % 32;
  const bool silu = p.epilogue == DecodeEpilogue::kSiluMul;
  const int pairs = silu ? p.n / 2 : (p.n + 1) / 2;
  const int warp = threadIdx.x / 32, half = warp % k_halves;
  const int pair_stride = gridDim.x * kWarps / k_halves;  // pairs one round of the grid covers
  const int first_pair = (blockIdx.x * kWarps + warp) / k_halves;
  // This warp's range of k: all of it, or a half (a multiple of 8 elements).
  const int k_per_half = kWholeSteps ? (p.k / k_halves + kLoopStepK - 1) / kLoopStepK * kLoopStepK
                                     : (p.k / k_halves + 7) / 8 * 8;
  const int k_begin = half * k_per_half, k_end = min(p.k, k_begin + k_per_half);
  auto row_a = [&](int j) -> int64_t { return silu ? j : 2 * j; };
  auto row_b = [&](int j) -> int64_t {  // a stands in for a missing b; its dots are dropped
    const int64_t b = silu ? j + p.n / 2 : 2 * j + 1;
    return b < p.n ? b : row_a(j);
  };
  // ra/rb: the chunks being multiplied; na/nb: the next step's, in flight.
  uint4 ra[kChunksInFlight], rb[kChunksInFlight], na[kChunksInFlight], nb[kChunksInFlight];
  auto load_chunks = [&](int j, int base, uint4(&da)[kChunksInFlight], uint4(&db)[kChunksInFlight]) {
    const __nv_bfloat16* wa = p.w + row_a(j) * p.k;
    const __nv_bfloat16* wb = p.w + row_b(j) * p.k;
#pragma unroll
    for (int u = 0; u < kChunksInFlight; ++u) {
      const int i = base + u * 32 * 8;
      if (kWholeSteps || i < k_end) {
        da[u] = __ldg(reinterpret_cast<const uint4*>(wa + i));
        db[u] = __ldg(reinterpret_cast<const uint4*>(wb + i));
      }
    }
  };
  // Both register buffers fill before the wait: the first step into ra/rb,
  // the step after it (further along k, or the warp's next pair) into
  // na/nb, which the loop would otherwise request only after the wait and
  // the input's staging. A row pair of k <= 2 kLoopStepK (every 0.3b linear but
  // down_proj), or two pairs of k <= kLoopStepK, then wait on no weight load
  // issued after the kernel before completes (v18 timeline: gate|up and
  // down ran 1 - 3 us past the smaller linears).
  bool next_loaded = false;
  if (first_pair < pairs) {
    load_chunks(first_pair, k_begin + lane * 8, ra, rb);
    if (k_begin + lane * 8 + kLoopStepK < k_end) {
      load_chunks(first_pair, k_begin + lane * 8 + kLoopStepK, na, nb);
      next_loaded = true;
    } else if (first_pair + pair_stride < pairs) {
      load_chunks(first_pair + pair_stride, k_begin + lane * 8, na, nb);
      next_loaded = true;
    }
  }

  // After this warp's weight requests, not before them: the prefetch's first
  // step is a dependent load of the step's items, which thread 0 waits for.
  if (p.epilogue == DecodeEpilogue::kRotaryKv) kernels::PrefetchEarlierKv(p.rotary);
  NormPrefetch norm;
  PrefetchNorm(p, norm);

  kernels::WaitForPrerequisiteGrids();
  // The residual this lane adds its first pair's sums to (kAddResidual; lane
  // r writes input row r's outputs), requested with the input, not after the dots.
  float residual_a = 0.0f, residual_b = 0.0f;
  if (p.epilogue == DecodeEpilogue::kAddResidual && half == 0 && lane < M && first_pair < pairs) {
    const int64_t b = 2 * first_pair + 1;
    residual_a = p.y[int64_t{lane} * p.n + 2 * first_pair];
    if (b < p.n) residual_b = p.y[int64_t{lane} * p.n + b];
  }
  LoadInputRows<M>(p, norm, xs, row_sums);
  __syncthreads();

  for (int j = first_pair; j < pairs; j += pair_stride) {
    const int64_t a = row_a(j), b = silu ? j + p.n / 2 : 2 * j + 1;
    const bool has_b = b < p.n;
    float acc[M][2];
#pragma unroll
    for (int r = 0; r < M; ++r) acc[r][0] = acc[r][1] = 0.0f;

    for (int base = k_begin + lane * 8; base < k_end; base += kLoopStepK) {
      // The next step's chunks: further along this row pair, or the start
      // of the warp's next pair (lm_head's warps loop over several).
      const bool more_k = base + kLoopStepK < k_end, more_pairs = j + pair_stride < pairs;
      if (next_loaded) {
        next_loaded = false;  // requested before the wait
      } else if (more_k) {
        load_chunks(j, base + kLoopStepK, na, nb);
      } else if (more_pairs) {
        load_chunks(j + pair_stride, k_begin + lane * 8, na, nb);
      }
#pragma unroll
      for (int u = 0; u < kChunksInFlight; ++u) {
        const int i = base + u * 32 * 8;
        if (!kWholeSteps && i >= k_end) break;
        float fa[8], fb[8];
        kernels::WidenBf16x8(ra[u], fa);
        kernels::WidenBf16x8(rb[u], fb);
#pragma unroll
        for (int r = 0; r < M; ++r) {
          const float4 x0 = *reinterpret_cast<const float4*>(xs + r * p.k + i);
          const float4 x1 = *reinterpret_cast<const float4*>(xs + r * p.k + i + 4);
          const float xv[8] = {x0.x, x0.y, x0.z, x0.w, x1.x, x1.y, x1.z, x1.w};
#pragma unroll
          for (int e = 0; e < 8; ++e) {
            acc[r][0] = fmaf(fa[e], xv[e], acc[r][0]);
            acc[r][1] = fmaf(fb[e], xv[e], acc[r][1]);
          }
        }
      }
      if (more_k || more_pairs) {
#pragma unroll
        for (int u = 0; u < kChunksInFlight; ++u) {
          ra[u] = na[u];
          rb[u] = nb[u];
        }
      }
    }

    float dot_a[M], dot_b[M];
#pragma unroll
    for (int r = 0; r < M; ++r) {
      dot_a[r] = kernels::WarpSum(acc[r][0]);
      dot_b[r] = kernels::WarpSum(acc[r][1]);
    }
    if (k_halves == 2) {
      // The pair's second warp hands its dots to the first over shared
      // memory, between two barriers of the pair's 64 threads (ids 1, 2: 0
      // is __syncthreads'); the second also keeps half_dots from being
      // overwritten before the first has read it.
      const int slot = warp / 2;
      if (half == 1 && lane == 0) {
#pragma unroll
        for (int r = 0; r < M; ++r) {
          half_dots[slot][r][0] = dot_a[r];
          half_dots[slot][r][1] = dot_b[r];
        }
      }
      asm volatile("bar.sync %0, 64;\n" : : "r"(1 + slot) : "memory");
      if (half == 0) {
#pragma unroll
        for (int r = 0; r < M; ++r) {
          dot_a[r] += half_dots[slot][r][0];
          dot_b[r] += half_dots[slot][r][1];
        }
      }
      asm volatile("bar.sync %0, 64;\n" : : "r"(1 + slot) : "memory");
      if (half == 1) continue;  // the first warp stores the pair
    }
#pragma unroll
    for (int r = 0; r < M; ++r) {
      const float da = dot_a[r], db = dot_b[r];
      if (lane != r % 32) continue;  // one lane writes each input row's outputs
      const float va = da + (p.bias != nullptr ? p.bias[a] : 0.0f);
      const float vb = db + (p.bias != nullptr && has_b ? p.bias[b] : 0.0f);
      switch (p.epilogue) {
        case DecodeEpilogue::kStore:
          p.y[int64_t{r} * p.n + a] = va;
          if (has_b) p.y[int64_t{r} * p.n + b] = vb;
          break;
        case DecodeEpilogue::kAddResidual: {
          const bool first = j == first_pair;  // its residual was loaded up front
          float& ya = p.y[int64_t{r} * p.n + a];
          ya = (first ? residual_a : ya) + va;
          if (has_b) {
            float& yb = p.y[int64_t{r} * p.n + b];
            yb = (first ? residual_b : yb) + vb;
          }
          break;
        }
        case DecodeEpilogue::kSiluMul:
          p.y[int64_t{r} * (p.n / 2) + j] = kernels::Silu(va) * vb;
          break;
        case DecodeEpilogue::kRotaryKv:
          kernels::RotaryKvStore(p.rotary, p.y, p.n, r, a, va, vb);
          break;
      }
    }
  }
}

// CTAs of DecodeLinearKernel<M, *> resident on the device at once (at the
// largest k PrepareDecodeLinear allowed); 0 until then.
int g_resident_ctas[kDecodeLinearMaxRows] = {};

template <int M, bool kWholeSteps>
cudaError_t Launch(const DecodeLinearParams& p, cudaStream_t stream) {
  const int pairs = p.epilogue == DecodeEpilogue::kSiluMul ? p.n / 2 : (p.n + 1) / 2;
  int ctas = std::min(kMaxCtas, (pairs + kWarps - 1) / kWarps);
  // A grid past one wave starts its last CTAs, and their weight loads, only
  // as the first ones exit: after the wait, on the critical path. Where two
  // pairs a warp fit one wave and a pair is one loop step (k <= kLoopStepK; both
  // pairs' weights then load before the wait), take them (the 0.3b's
  // gate|up at batch 1: 768 CTAs against 396 resident, 3 an SM at 135
  // registers -> 384).
  const int resident = g_resident_ctas[M - 1];
  if (p.single_wave && resident > 0 && ctas > resident && p.k <= kLoopStepK)
    ctas = std::min(ctas, (pairs + 2 * kWarps - 1) / (2 * kWarps));
  // Rows longer than a warp's two register buffers: two warps a pair, each
  // half of k, where twice the warps still fit one wave.
  int k_halves = 1;
  const int split_ctas = (2 * pairs + kWarps - 1) / kWarps;
  if (p.split_long_k && p.k > 2 * kLoopStepK && resident > 0 && split_ctas <= std::min(resident, kMaxCtas)) {
    k_halves = 2;
    ctas = split_ctas;
  }
  // A programmatic dependent launch: see the kernel.
  return kernels::LaunchDependent(DecodeLinearKernel<M, kWholeSteps>, dim3(static_cast<unsigned>(ctas)),
                                  dim3(kWarps * 32), sizeof(float) * static_cast<size_t>(M) * static_cast<size_t>(p.k),
                                  stream, p, k_halves);
}

template <int M>
cudaError_t AllowSharedMemory(int32_t max_k) {
  const int bytes = std::max(static_cast<int>(sizeof(float)) * M * max_k, 0);
  // Both forms' residency; the launcher plans with the smaller.
  int per_sm = 0, whole_per_sm = 0, device = 0, sms = 0;
  cudaError_t e = cudaSuccess;
  for (const auto kernel : {DecodeLinearKernel<M, false>, DecodeLinearKernel<M, true>})
    if (e == cudaSuccess) e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
  if (e == cudaSuccess)
    e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, DecodeLinearKernel<M, false>, kWarps * 32, bytes);
  if (e == cudaSuccess)
    e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&whole_per_sm, DecodeLinearKernel<M, true>, kWarps * 32, bytes);
  if (e == cudaSuccess) e = cudaGetDevice(&device);
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  if (e == cudaSuccess) g_resident_ctas[M - 1] = std::min(per_sm, whole_per_sm) * sms;
  return e;
}

template <int M>
cudaError_t Launch(const DecodeLinearParams& p, cudaStream_t stream) {
  return p.k % kLoopStepK == 0 ? Launch<M, true>(p, stream) : Launch<M, false>(p, stream);
}

}  // namespace

cudaError_t PrepareDecodeLinear(int32_t max_k, int32_t max_rows) {
  if (max_k <= 0 || max_rows < 0 || max_rows > kDecodeLinearMaxRows) return cudaErrorInvalidValue;
  using Allow = cudaError_t (*)(int32_t);
  constexpr Allow kAllow[] = {AllowSharedMemory<1>, AllowSharedMemory<2>, AllowSharedMemory<3>, AllowSharedMemory<4>,
                              AllowSharedMemory<5>, AllowSharedMemory<6>, AllowSharedMemory<7>, AllowSharedMemory<8>};
  for (int32_t m = 1; m <= max_rows; ++m)
    if (const cudaError_t e = kAllow[m - 1](max_k); e != cudaSuccess) return e;
  return cudaSuccess;
}

int32_t DecodeLinearMaxRows(int32_t max_k, cudaError_t* error) {
  int device = 0, optin = 0;
  *error = cudaGetDevice(&device);
  if (*error == cudaSuccess) *error = cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device);
  if (*error != cudaSuccess || max_k <= 0) return 0;
  return static_cast<int32_t>(
      std::min<int64_t>(kDecodeLinearMaxRows, optin / (static_cast<int64_t>(sizeof(float)) * max_k)));
}

bool RotaryKvParamsValid(const DecodeRotaryKv& q, int64_t n) {
  return q.positions != nullptr && q.slots != nullptr && q.inv_freq != nullptr && q.cache.k != nullptr &&
         q.cache.v != nullptr && q.cache.block_size > 0 && q.cache.head_dim > 0 && q.cache.head_dim % 2 == 0 &&
         q.num_heads > 0 && q.cache.num_kv_heads > 0 &&
         (q.prefetch_items == nullptr || (q.prefetch_block_tables != nullptr && q.prefetch_num_items >= 1)) &&
         n == int64_t{q.num_heads + 2 * q.cache.num_kv_heads} * q.cache.head_dim;
}

bool RotaryKvParamsValid(const DecodeLinearParams& p) { return RotaryKvParamsValid(p.rotary, p.n); }

cudaError_t LaunchDecodeLinear(const DecodeLinearParams& p, cudaStream_t stream) {
  const bool one_input = (p.x_f32 != nullptr) != (p.x_bf16 != nullptr);
  if (!one_input || p.router_records.on() ||  // router records: the int4 kernel's only
      p.w == nullptr || p.y == nullptr || p.m < 1 || p.m > kDecodeLinearMaxRows || p.n <= 0 ||
      p.k <= 0 || p.k % 8 != 0 || (p.norm_weight != nullptr && p.x_f32 == nullptr) ||
      (p.epilogue == DecodeEpilogue::kSiluMul && p.n % 2 != 0))
    return cudaErrorInvalidValue;
  // The input and the norm weight are read as float4s (bf16 input: 8 bytes at a time).
  if (reinterpret_cast<uintptr_t>(p.x_f32) % 16 != 0 || reinterpret_cast<uintptr_t>(p.x_bf16) % 8 != 0 ||
      reinterpret_cast<uintptr_t>(p.norm_weight) % 16 != 0)
    return cudaErrorInvalidValue;
  if (p.epilogue == DecodeEpilogue::kRotaryKv && !RotaryKvParamsValid(p)) return cudaErrorInvalidValue;
  switch (p.m) {
    case 1: return Launch<1>(p, stream);
    case 2: return Launch<2>(p, stream);
    case 3: return Launch<3>(p, stream);
    case 4: return Launch<4>(p, stream);
    case 5: return Launch<5>(p, stream);
    case 6: return Launch<6>(p, stream);
    case 7: return Launch<7>(p, stream);
    default: return Launch<8>(p, stream);
  }
}

}  // namespace ernie::cuda

#include "engine/backend/cuda/kernels/greedy_rows.h"

#include "engine/backend/cuda/kernels/common.cuh"

namespace ernie::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kPerCta = 2048;  // logits a CTA folds: 8 a thread

// A key whose order is (value, then smaller id): the float's bits made
// unsigned-monotone in the high half, ~id in the low half. NaN is -inf, and
// -0 is +0 (the two compare equal, so their tie goes to the smaller id).
__device__ __forceinline__ unsigned long long KeyOf(float v, int32_t id) {
  v = v != v ? -INFINITY : __fadd_rn(v, 0.0f);
  uint32_t u = __float_as_uint(v);
  u = (u & 0x80000000u) ? ~u : (u | 0x80000000u);
  return (static_cast<unsigned long long>(u) << 32) | static_cast<unsigned long long>(~static_cast<uint32_t>(id));
}

// GreedyTokenOfKey, for the host's read and the kernel's own token alike:
// KeyOf undone (the float's bits back from the high half), -1 for a maximum
// that is not finite (exponent all ones: an infinity, or NaN) or no key.
__host__ __device__ __forceinline__ int32_t TokenOfKey(unsigned long long key) {
  if (key == 0) return -1;
  const auto u = static_cast<uint32_t>(key >> 32);
  const uint32_t bits = (u & 0x80000000u) ? (u & 0x7FFFFFFFu) : ~u;
  if ((bits & 0x7F800000u) == 0x7F800000u) return -1;
  return static_cast<int32_t>(~static_cast<uint32_t>(key & 0xFFFFFFFFull));
}

__global__ void __launch_bounds__(kThreads) GreedyRowsKernel(GreedyRowsParams p) {
  int32_t logit_row = static_cast<int32_t>(blockIdx.y);
  if (p.rows != nullptr) {
    const SampleRowParams& row = p.rows[blockIdx.y];
    if (!row.fast_greedy) return;  // the sampling kernel's row
    logit_row = row.logit_row;
  }
  const float* logits = p.logits + static_cast<size_t>(logit_row) * static_cast<size_t>(p.vocab);
  const int32_t begin = static_cast<int32_t>(blockIdx.x) * kPerCta;
  const int32_t end = min(p.vocab, begin + kPerCta);
  // Every load of the thread first (independent, so all in flight at once),
  // then the folds.
  constexpr int kLoads = kPerCta / kThreads;
  float v[kLoads];
#pragma unroll
  for (int j = 0; j < kLoads; ++j) {
    const int32_t i = begin + j * kThreads + static_cast<int32_t>(threadIdx.x);
    v[j] = i < end ? logits[i] : -INFINITY;
  }
  unsigned long long best = 0;
#pragma unroll
  for (int j = 0; j < kLoads; ++j) {
    const int32_t i = begin + j * kThreads + static_cast<int32_t>(threadIdx.x);
    if (i < end) best = max(best, KeyOf(v[j], i));
  }
  for (int offset = 16; offset > 0; offset >>= 1) best = max(best, __shfl_xor_sync(kernels::kFullMask, best, offset));
  __shared__ unsigned long long warp_best[kThreads / 32];
  if (threadIdx.x % 32 == 0) warp_best[threadIdx.x / 32] = best;
  __syncthreads();
  if (threadIdx.x != 0) return;
  for (int w = 1; w < kThreads / 32; ++w) best = max(best, warp_best[w]);
  const unsigned row_index = blockIdx.y;
  atomicMax(p.running + row_index, best);
  // The row's last CTA (every other one's atomicMax is done before its
  // arrival: the fence orders them) takes the key and leaves both zero. Its
  // store of the key (into the host's memory where the staging is mapped)
  // needs no fence of its own: the host reads it only once the launch is
  // complete, and a kernel's completion makes its writes visible to the host.
  __threadfence();
  if (atomicAdd(p.arrivals + row_index, 1u) != gridDim.x - 1) return;
  const unsigned long long key = atomicExch(p.running + row_index, 0ull);
  p.arrivals[row_index] = 0;
  p.keys[row_index] = key;
  if (p.results != nullptr) p.results[row_index].token = TokenOfKey(key);
}

}  // namespace

cudaError_t LaunchGreedyRows(const GreedyRowsParams& p, cudaStream_t stream) {
  if (p.num_rows == 0) return cudaSuccess;
  if (p.logits == nullptr || p.keys == nullptr || p.running == nullptr ||
      p.arrivals == nullptr || p.num_rows < 0 || p.num_rows > 65535 || p.vocab < 1)
    return cudaErrorInvalidValue;
  const dim3 grid(static_cast<unsigned>((p.vocab + kPerCta - 1) / kPerCta), static_cast<unsigned>(p.num_rows));
  GreedyRowsKernel<<<grid, kThreads, 0, stream>>>(p);
  return cudaGetLastError();
}

int32_t GreedyTokenOfKey(unsigned long long key) { return TokenOfKey(key); }

}  // namespace ernie::cuda

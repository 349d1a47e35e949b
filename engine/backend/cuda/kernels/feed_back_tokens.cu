#include "engine/backend/cuda/kernels/feed_back_tokens.h"

namespace ernie::cuda {
namespace {

constexpr int kThreads = 128;

// The id in a greedy key (greedy_rows.cu's layout: ~id in the low half), or
// -1 when no CTA wrote the key or its value is not finite.
__device__ __forceinline__ int32_t TokenOfKey(unsigned long long key) {
  if (key == 0) return -1;
  const auto u = static_cast<uint32_t>(key >> 32);
  const uint32_t bits = (u & 0x80000000u) ? (u & 0x7FFFFFFFu) : ~u;
  if (!isfinite(__uint_as_float(bits))) return -1;
  return static_cast<int32_t>(~static_cast<uint32_t>(key & 0xFFFFFFFFull));
}

__global__ void __launch_bounds__(kThreads) FeedBackTokensKernel(FeedBackTokensParams p) {
  const int32_t i = static_cast<int32_t>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i >= p.num_fed) return;
  const int32_t token_index = p.fed[2 * i];
  const int32_t row = p.fed[2 * i + 1];
  const int32_t token = p.rows[row].fast_greedy ? TokenOfKey(p.greedy_keys[row]) : p.results[row].token;
  p.token_ids[token_index] = token >= 0 && token < p.vocab ? token : 0;
}

}  // namespace

cudaError_t LaunchFeedBackTokens(const FeedBackTokensParams& p, cudaStream_t stream) {
  if (p.num_fed <= 0) return cudaSuccess;
  const unsigned blocks = static_cast<unsigned>((p.num_fed + kThreads - 1) / kThreads);
  FeedBackTokensKernel<<<blocks, kThreads, 0, stream>>>(p);
  return cudaGetLastError();
}

}  // namespace ernie::cuda

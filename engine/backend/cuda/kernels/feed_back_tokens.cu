#include "engine/backend/cuda/kernels/feed_back_tokens.h"

namespace ernie::cuda {
namespace {

constexpr int kThreads = 128;

__global__ void __launch_bounds__(kThreads) FeedBackTokensKernel(FeedBackTokensParams p) {
  const int32_t i = static_cast<int32_t>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i >= p.num_fed) return;
  const int32_t token_index = p.fed[2 * i];
  const int32_t row = p.fed[2 * i + 1];
  const int32_t token = p.results[row].token;
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

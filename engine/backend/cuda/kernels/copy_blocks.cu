#include "engine/backend/cuda/kernels/copy_blocks.h"

namespace ernie::cuda {

namespace {

// Grid: (num_copies, num_layers * 2 * num_kv_heads). Each CTA copies one
// head's first num_tokens rows of one layer's K or V, which are contiguous.
__global__ void CopyBlocksKernel(CopyBlocksParams p) {
  const int32_t* op = p.copies + 3 * blockIdx.x;
  const int64_t src = op[0], dst = op[1], tokens = op[2];
  const int64_t plane = blockIdx.y / p.num_kv_heads;  // layer * 2 + (0: k, 1: v)
  const int64_t head = blockIdx.y % p.num_kv_heads;
  const int64_t head_elems = int64_t{p.block_size} * p.head_dim;
  const int64_t block_elems = p.num_kv_heads * head_elems;
  const int64_t plane_elems = p.num_blocks * block_elems;
  const auto* from = reinterpret_cast<const uint4*>(p.cache + plane * plane_elems + src * block_elems + head * head_elems);
  auto* to = reinterpret_cast<uint4*>(p.cache + plane * plane_elems + dst * block_elems + head * head_elems);
  const int64_t vectors = tokens * p.head_dim / 8;
  for (int64_t i = threadIdx.x; i < vectors; i += blockDim.x) to[i] = from[i];
}

}  // namespace

cudaError_t LaunchCopyBlocks(const CopyBlocksParams& p, cudaStream_t stream) {
  if (p.num_copies == 0) return cudaSuccess;
  if (p.cache == nullptr || p.copies == nullptr || p.num_copies < 0 || p.num_layers <= 0 || p.num_kv_heads <= 0 ||
      p.block_size <= 0 || p.head_dim <= 0 || p.head_dim % 8 != 0)
    return cudaErrorInvalidValue;
  const dim3 grid(static_cast<unsigned>(p.num_copies), static_cast<unsigned>(p.num_layers * 2 * p.num_kv_heads));
  CopyBlocksKernel<<<grid, 128, 0, stream>>>(p);
  return cudaGetLastError();
}

}  // namespace ernie::cuda

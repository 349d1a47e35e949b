// Block copies for forked sequences: rows [0, num_tokens) of a source block's
// keys and values, every layer and KV head, into a destination block.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace ernie::cuda {

struct CopyBlocksParams {
  // The whole cache: [num_layers, 2 (k, v), num_blocks, num_kv_heads, block_size, head_dim] bf16.
  __nv_bfloat16* cache = nullptr;
  const int32_t* copies = nullptr;  // [num_copies, 3]: src_block, dst_block, num_tokens (checked by the caller)
  int32_t num_copies = 0;
  int32_t num_layers = 0;
  int32_t num_blocks = 0;
  int32_t num_kv_heads = 0;
  int32_t block_size = 0;
  int32_t head_dim = 0;  // a multiple of 8 (16-byte copies)
};

cudaError_t LaunchCopyBlocks(const CopyBlocksParams& p, cudaStream_t stream);

}  // namespace ernie::cuda

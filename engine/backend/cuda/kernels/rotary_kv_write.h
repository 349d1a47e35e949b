// Interleaved rotary embedding (pairs (2i, 2i+1), GPT-J style) in float32,
// fused with the write of the step's keys and values into the paged cache.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "engine/backend/cuda/paged_kv_view.h"

namespace ernie::cuda {

struct RotaryKvWriteParams {
  // [tokens, (num_heads + 2 num_kv_heads) * head_dim]: the fused QKV GEMM's
  // output, columns q heads, then k heads, then v heads. q is rotated in
  // place (bias added first); k and v are read.
  float* qkv = nullptr;
  const float* bias = nullptr;         // [(num_heads + 2 num_kv_heads) * head_dim] or nullptr
  const int32_t* positions = nullptr;  // [tokens] absolute positions
  const int32_t* slots = nullptr;      // [tokens] cache slot: block * block_size + row
  const float* inv_freq = nullptr;     // [head_dim / 2] theta ^ (-2i / head_dim), float32
  PagedKvView cache;                   // this layer's keys and values (written at `slots`)
  int32_t tokens = 0;
  int32_t num_heads = 0;
  int32_t num_kv_heads = 0;
  int32_t head_dim = 0;
};

cudaError_t LaunchRotaryKvWrite(const RotaryKvWriteParams& p, cudaStream_t stream);

}  // namespace ernie::cuda

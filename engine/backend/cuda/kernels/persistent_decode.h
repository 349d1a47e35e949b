// A whole one-token decode step of a dense bf16 model in one persistent
// kernel: one CTA an SM, the phases of every layer separated by grid-wide
// barriers instead of kernel boundaries.
//
// Why: a batch-1 step of the 0.3b as separate kernels is a chain of ~110
// dependent launches, and inside a CUDA graph each boundary costs ~2 us even
// when it moves no bytes (NOTES.md v18); the step took 0.456 ms against a
// 0.17 ms byte floor. Here a phase boundary is a barrier, and each linear
// round's weights (they never depend on the step) are copied into shared
// memory while the round before it runs. Measured slower than the
// per-layer kernels (0.93 against 0.46 ms, NOTES.md v23): off by default.
//
// Per layer, five phases:
//   1. h = RMSNorm(x); q|k|v = h W_qkv^T (+ b): rotary on q and k, q to
//      `q` (float32), k and v into the paged cache at the token's slot
//   2. attention: each (KV head, split of the context) on one CTA, the
//      split's partial softmax (max, sum, unnormalised output) to `partial`
//   3. every CTA merges the splits into the attention output (float32, in
//      shared memory); x += attn W_o^T (+ b)
//   4. h = RMSNorm(x); act = silu(h W_gate^T) * (h W_up^T) (float32)
//   5. x += act W_down^T (+ b)
// then, when the step wants logits, RMSNorm(x) lm_head^T into `logits`.
// The embedding row is read in layer 0's first phase. Numerics are those of
// the CPU reference: float32 residual, float32 normalised inputs, attention
// output and SiLU product (the separate kernels round the last two to bf16).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

#include "engine/backend/cuda/paged_kv_view.h"

namespace ernie::cuda {

// One layer's device pointers (weights bf16 [out, in], biases and norms
// float32; a bias may be null). gate_up holds the gate rows, then the up rows.
struct PersistentDecodeLayer {
  const __nv_bfloat16* qkv = nullptr;
  const __nv_bfloat16* o_proj = nullptr;
  const __nv_bfloat16* gate_up = nullptr;
  const __nv_bfloat16* down = nullptr;
  const float* qkv_bias = nullptr;
  const float* o_bias = nullptr;
  const float* gate_up_bias = nullptr;
  const float* down_bias = nullptr;
  const float* input_norm = nullptr;
  const float* post_attn_norm = nullptr;
  __nv_bfloat16* k_cache = nullptr;  // this layer's keys, PagedKvView layout
  __nv_bfloat16* v_cache = nullptr;
};

// Context splits of the attention phase: at most this many CTAs a KV head,
// each taking at least kPersistentDecodeKeysPerSplit keys and at most 64
// (two warps of a lane a key for each query head), so contexts up to
// kPersistentDecodeMaxSplits x 64.
inline constexpr int32_t kPersistentDecodeMaxSplits = 16;
inline constexpr int32_t kPersistentDecodeKeysPerSplit = 32;
inline constexpr int32_t kPersistentDecodeMaxContext = 1024;

struct PersistentDecodeParams {
  const PersistentDecodeLayer* layers = nullptr;  // [num_layers], device memory
  int32_t num_layers = 0;
  const __nv_bfloat16* embed = nullptr;    // [vocab, hidden]
  const __nv_bfloat16* lm_head = nullptr;  // [vocab, hidden] (the embedding when tied)
  const float* final_norm = nullptr;       // [hidden]
  const float* inv_freq = nullptr;         // [head_dim / 2] rotary inverse frequencies
  int32_t hidden = 0;        // a multiple of 256, at most 4,096
  int32_t num_heads = 0;     // query heads
  int32_t num_kv_heads = 0;  // num_heads / num_kv_heads <= 8
  int32_t head_dim = 0;      // 128
  int32_t intermediate = 0;  // a multiple of 256
  int32_t vocab = 0;
  float eps = 1e-5f;
  float attn_scale = 1.0f;
  int32_t block_size = 0;    // KV cache rows a block
  int32_t num_blocks = 0;    // KV cache blocks of a layer
  // The step's inputs (StepInputs): one token at positions[0], its cache
  // slot, and its block table starting at block_tables[items[0].block_table_offset].
  const int32_t* token_ids = nullptr;
  const int32_t* positions = nullptr;
  const int32_t* slots = nullptr;
  const AttentionWorkItem* items = nullptr;
  const int32_t* block_tables = nullptr;
  // Workspace (device memory):
  float* x = nullptr;         // [hidden] the residual stream
  float* q = nullptr;         // [num_heads * head_dim] rotated queries
  float* act = nullptr;       // [intermediate]
  float* partial = nullptr;   // [PersistentDecodePartialFloats]
  float* logits = nullptr;    // [vocab], or nullptr: no logit pass
  // [1] the grid barrier's arrival count: zero before the first launch, and
  // only ever grown by whole launches (of 5 x num_layers barriers each).
  unsigned long long* barrier = nullptr;
  // Diagnostics only (the results are wrong): phases to leave out, to time
  // what is left. kPersistentDecodeSkip* bits; 0 in normal use.
  int32_t skip = 0;
  // Set by LaunchPersistentDecode: units a linear warp takes a round (the
  // shared-memory weight ring's size).
  int32_t round_slots = 0;
};
inline constexpr int32_t kPersistentDecodeSkipAttention = 1;  // attention and the splits' merge
inline constexpr int32_t kPersistentDecodeSkipNorms = 2;      // RMSNorms and the act staging
inline constexpr int32_t kPersistentDecodeSkipLinears = 4;    // every linear, its weights never loaded
inline constexpr int32_t kPersistentDecodeSkipLmHead = 8;

// Floats of PersistentDecodeParams::partial for a model of `num_heads` query
// heads of `head_dim`.
inline int64_t PersistentDecodePartialFloats(int64_t num_heads, int64_t head_dim) {
  return num_heads * kPersistentDecodeMaxSplits * (head_dim + 4);
}

// Whether the kernel supports the shape (the sizes the params' comments
// name) on the current device with one CTA on every SM; `why` says what
// does not fit. Allows the kernel's shared memory once (call before any
// graph capture).
bool PreparePersistentDecode(const PersistentDecodeParams& shape, const char** why);

// One step, cooperative (every CTA resident). cudaErrorInvalidValue for
// missing pointers or a shape PreparePersistentDecode did not accept.
cudaError_t LaunchPersistentDecode(const PersistentDecodeParams& p, cudaStream_t stream);

}  // namespace ernie::cuda

// Paged causal attention on the tensor cores (mma.m16n8k16, bf16 operands,
// float32 scores, softmax and accumulation), for head dims that are
// multiples of 16 up to 128. Same contract as paged_attention.h (the
// CUDA-core kernel, kept for other head dims and as this one's test
// reference), with bigger work items:
//
//   - An item holds up to kMmaAttentionRows (token, head-of-the-group) query
//     rows, so a prefill chunk's 8 tokens x 8 heads share each K/V tile a CTA
//     stages in shared memory, where the CUDA-core kernel's items hold one
//     token of a group of 8 and re-read the whole prefix per token.
//   - Two shapes, chosen by the step: steps of single-token items (decode:
//     at most 16 rows an item) give each of a CTA's four warps its own
//     quarter of every 64-key tile and merge the four partial softmaxes at
//     the end; other steps give each warp 16 of the item's 64 rows and all
//     64 keys of a tile. Decode items of at most 8 query heads (a KV head's
//     group) take a kernel of their own with the queries as the mma's
//     8-wide side (S^T = K Q^T, O^T = V^T P^T): the 16-wide side holds a
//     warp's 16 keys and then 16 dims of the output, where 16 query rows
//     would be half padding (PagedAttentionParams::decode_swap_ab). Steps
//     of longer items take the general row shape, except that with swap-AB
//     on, each one-token item among them (a decode beside prefill chunks)
//     takes the swap-AB body within the same launch.
//   - Unsplit decode steps of short contexts may take a wide swap-AB kernel
//     (PagedAttentionParams::wide_decode): 16 warps, four tiles copied at
//     once, one CTA per (item, KV head) and no merge kernel.
//   - Split-KV as paged_attention.h, but a split holds a multiple of 64 keys,
//     so a short context runs in a few full CTAs (the rest return at once)
//     and the merge reads only the splits that hold keys.
// q is rounded to bf16 and the probabilities are rounded to bf16 for the
// P V product, as bf16 attention implementations do.
// Both the attention kernel and the split merge are launched as
// programmatic dependents: they read the step's host-staged items,
// positions and block tables before waiting for the kernel before them
// (which writes q and the cache, or the partials).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "engine/backend/cuda/kernels/paged_attention.h"

namespace ernie::cuda {

// Query rows of one work item (and rows of one CTA's partial output).
inline constexpr int32_t kMmaAttentionRows = 64;

// Keys the wide decode kernel (PagedAttentionParams::wide_decode) holds at
// once: one round of its four 64-key tiles. Longer contexts take several
// rounds, each a memory round trip, so callers keep it to contexts of at
// most this many keys.
inline constexpr int32_t kWideDecodeAttentionKeys = 256;

bool MmaAttentionSupportsHeadDim(int32_t head_dim);

// What a step's items hold; it picks the kernel shape and, like the item
// count, must be the same for every replay of a graph. Each kernel is
// correct for any items; the shape is about speed.
enum class AttentionItems {
  kSingleToken,  // every item one token (a decode step; then at most 16 rows an item)
  kMultiToken,   // no item of one token (prefill chunks)
  kMixed,        // some of one token beside longer ones (decodes beside prefill chunks)
};

// What StepInputs planned: `num_items` items of which `single_token_items` hold one token.
AttentionItems AttentionItemsOf(int32_t num_items, int32_t single_token_items);

// `p` as for LaunchPagedAttention, except: items hold up to
// kMmaAttentionRows rows; partial_out / partial_ml (needed when
// num_splits > 1) are [PagedAttentionPartialCtas, kMmaAttentionRows, head_dim]
// and [.., kMmaAttentionRows, 2].
cudaError_t LaunchMmaAttention(const PagedAttentionParams& p, AttentionItems items, cudaStream_t stream);

}  // namespace ernie::cuda

// The CUDA backend for ERNIE-4.5, dense and mixture-of-experts: the same function as the CPU
// reference (engine/backend/cpu), computed on one GPU with bf16 weights and
// activations between kernels, float32 accumulation, a float32 residual
// stream and a paged bf16 KV cache. Build-time availability: the target
// ernie_cuda_backend defines ERNIE_HAVE_CUDA_BACKEND=1 for its users.
//
// Memory is taken once in CreateCudaBackend (weights, KV pool, workspaces
// for max_tokens_per_step); Forward and CopyBlocks never allocate. Not
// thread-safe: one engine thread calls Forward and CopyBlocks.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/backend/backend.h"
#include "engine/backend/cuda/gemm_tuning.h"
#include "engine/model/ernie4_5_weights.h"

namespace ernie {

struct CudaBackendOptions {
  int device = 0;                     // CUDA device ordinal
  int64_t block_size = 16;            // tokens per KV block
  int64_t num_blocks = 0;             // KV blocks in the pool (each layer: [num_blocks, kv_heads, block_size, head_dim] x 2)
  // When > 0 (at most 1), the KV pool takes at most this fraction of the
  // device memory still free once the weights and workspaces are in place
  // (the KV pool is allocated last): num_blocks 0 means exactly that much,
  // num_blocks > 0 the smaller of the two. kv_shape() reports the result.
  double kv_free_memory_fraction = 0.0;
  int64_t max_sample_rows = 1024;     // sample rows one device-sampling launch carries (more go in turns)
  int64_t max_tokens_per_step = 512;  // workspace size: most tokens one Forward carries
  int64_t max_logit_rows = 256;       // lm_head rows computed at once (the f32 logits workspace is [rows, vocab]); more are done in turns
  int64_t max_blocks_per_step = 0;    // block-table entries one step may carry; 0: max_tokens_per_step x min(num_blocks, blocks of max_position_embeddings)
  // Steps of at most this many tokens (whose logit rows fit one lm_head pass)
  // replay a CUDA graph captured the second time their (tokens, attention
  // items, logit rows) are seen (graph_admission.h: one-off shapes run
  // eagerly); 0 turns graphs off.
  int64_t graph_max_tokens = 256;
  int max_graphs = 128;               // graphs kept; steps of further keys run without one
  // Most CTAs one (attention item, KV head) pair's context is split over when
  // a step has too few pairs to fill the device (split-KV); 1 turns it off.
  int max_attention_splits = 32;
  // Steps whose longest context is at most unsplit_attention_max_context
  // keys and that have at least unsplit_attention_min_pairs (item, KV head)
  // pairs run attention unsplit whatever the split rule says: there the
  // split's merge kernel, a dependent step of ~2 us inside the graph, costs
  // more than the parallelism gains. Measured on the 0.3b (NOTES.md v20):
  // contexts of 128 - 256 keys 4 - 6% faster at 4 - 16 sequences, 2% slower
  // at 1 then; 384 - 512 keys slower at 1 - 8. Since the early keys (v32)
  // 1 - 2 sequences gain too (v35: 0.3b batch 1 0.453 -> 0.437 ms on an
  // H200, 0.498 - 0.507 -> 0.480 - 0.482 on two H100s; the 21B-A3B, whose
  // short decode steps take the wide kernel below, 1.748 -> 1.737 on one
  // H100 and no gain on the other), so every pair count qualifies. The
  // step's graph key carries the choice. 0: split by the item count alone
  // (the before).
  int64_t unsplit_attention_max_context = 256;
  int unsplit_attention_min_pairs = 1;
  // Decode steps of at most wide_decode_attention_max_pairs (item, KV head)
  // pairs whose longest context is at most 256 keys
  // (kWideDecodeAttentionKeys) run attention unsplit on the wide decode
  // kernel (kernels/mma_attention.h: one CTA of 16 warps a pair holds the
  // whole context at once; no split CTAs, no merge kernel), and so do the
  // short-context steps above when they have that few pairs. The step's
  // graph key carries the choice. 0: off; -1: by model, as measured on
  // H100s (NOTES.md v35: the 21B-A3B AWQ batch-1 step 1.722 - 1.738 ms
  // with it, 1.736 - 1.770 unsplit on four-warp CTAs, 1.747 - 1.754 split;
  // the 0.3b slower with it, 0.502 against 0.482 at batch 1): 8 for
  // mixture-of-experts models, 0 for dense ones. Not yet measured on an H200.
  int wide_decode_attention_max_pairs = -1;
  // Attention on the tensor cores (kernels/mma_attention.h) for head dims
  // 16, 32, 64 and 128; false, or another head dim: the CUDA-core kernel
  // (kernels/paged_attention.h).
  bool tensor_core_attention = true;
  // Decode steps of at most 8 query heads a KV head on the tensor-core
  // decode kernel with the queries as the mma's 8-wide side (swap AB);
  // false: the general kernel's decode shape (the before).
  bool decode_attention_swap_ab = true;
  // Steps of at most this many tokens run the fused decode kernels
  // (kernels/decode_linear.h, awq_decode_linear.h on AWQ int4 linears: GEMV
  // with the norms, SiLU and residual adds folded in) instead of cuBLAS or
  // the plain int4 GEMV with the row-wise kernels. -1: where the H200
  // measured them faster than the unfused pass (NOTES.md v19, v20; the fused
  // bf16 linear's CUDA-core dots and the int4 one's per-row staging grow
  // with every row): single-token steps, for every model. 0: off
  // (every step unfused). At most kDecodeLinearMaxRows (fewer when a layer's
  // input rows do not fit shared memory).
  int fused_decode_max_rows = -1;
  // The bf16 fused decode linear takes two row pairs a warp where one a warp
  // would launch more CTAs than fit the device at once (decode_linear.h
  // DecodeLinearParams::single_wave); false: one pair a warp (the before).
  bool decode_linear_single_wave = true;
  // Dense bf16 models, with the fused decode kernels on: steps of up to this
  // many tokens (at most 64) above fused_decode_max_rows run the same fused decode pass on the tensor-core
  // cluster kernel (kernels/cluster_decode_linear.h) instead of cuBLAS with
  // separate norm, SiLU and rotary kernels; models whose shapes the kernel
  // does not take keep the cuBLAS pass. 0 (the default): off, because on the
  // H200 it is still slower than cuBLAS plus the row-wise kernels (0.3b:
  // 17,438 against 18,941 tok/s at batch 16, 39,726 against 63,765 at 64;
  // NOTES.md v12 says where its time goes).
  int cluster_decode_max_rows = 0;
  // bf16 linears of steps of up to this many tokens (at most 256) that the
  // fused decode kernels do not take run on the small-batch tensor-core GEMM
  // (kernels/small_batch_gemm.h: wgmma on TMA-loaded tiles, weights requested
  // before it waits for the kernel before) instead of cuBLAS; 0: cuBLAS for
  // every such step (the before). 64: the H200 measured it faster from 2 to
  // 64 tokens (0.3b step 0.625 -> 0.530 ms at 16, cuBLAS's 0.771 -> 0.590 at
  // 32, 0.843 -> 0.797 at 64) and slower from 128 (0.94 -> 1.11), where every
  // CTA re-reading the x rows costs more than the weights (NOTES.md v21).
  int small_batch_gemm_max_rows = 64;
  // AWQ linears of steps of 17 up to this many tokens (at most 4,096) run on
  // the tiled int4 tensor-core GEMM (kernels/grouped_awq_gemm.h,
  // LaunchAwqTiledGemm: the MoE experts' kernel with the linear as its one
  // expert), in slot tiles of awq_tiled_gemm_tile_rows (16, 32 or 64); larger
  // steps dequantise to bf16 and run cuBLAS. 0 (the default): dequantise +
  // cuBLAS above the int4 GEMV's 16 rows. Measured slower on the 0.3b at
  // every size (NOTES.md v27: 1.003 -> 2.043 ms a 64-row step in tiles of
  // 64, 1.733 in tiles of 32; prefill 524k -> 293k tok/s): its 128-row CTAs
  // are 8 - 48 per linear at these widths, and with many tiles its
  // dequantise-and-mma loop is slower than cuBLAS on the bf16 copy. Kept as
  // an option for wider shapes.
  int awq_tiled_gemm_max_rows = 0;
  int awq_tiled_gemm_tile_rows = 64;
  // AWQ linears of steps of awq_small_batch_gemm_min_rows up to
  // awq_small_batch_gemm_max_rows tokens (at most 256) run on the small-batch
  // GEMM with int4 weights (kernels/small_batch_gemm.h: each CTA dequantises
  // its tile into shared memory before it waits for the kernel before, then
  // wgmma as for bf16), with its epilogues: SiLU-and-mul, rotary + KV write,
  // and on dense models the split RMSNorms (small_batch_norm_epilogues).
  // Why: above the int4 GEMV's 16 rows a step dequantised every weight to a
  // bf16 workspace and ran cuBLAS on it (0.3b, 64 rows: 1.003 ms against
  // bf16's 0.743, NOTES.md v27). Measured (NOTES.md v30, one H100, two
  // rounds): the 0.3b's AWQ step 1.086 / 1.088 -> 0.872 / 0.865 ms at 64
  // rows, 0.980 / 0.981 -> 0.637 / 0.650 at 24, 0.614 / 0.621 -> 0.600 /
  // 0.603 at 16; the 21B-A3B's (AWQ attention linears, int4 experts on their
  // own kernels) 5.67 / 5.69 -> 5.93 / 5.93 at 16, 7.61 / 7.64 -> 7.45 /
  // 7.44 at 32, 8.26 / 8.30 -> 8.44 / 8.47 at 64. So -1 (the default) is 64
  // on dense models and 0 (off) on MoE models; 0 is off everywhere.
  int awq_small_batch_gemm_max_rows = -1;
  int awq_small_batch_gemm_min_rows = 16;
  // lm_head of up to this many logit rows (and small_batch_gemm_max_rows) on
  // the small-batch GEMM instead of cuBLAS; 0: cuBLAS always; -1 (the
  // default): by model, 32 for dense models and 0 for mixture-of-experts
  // ones. v27 measured it slower at 32 and 64 rows; since its weights stream
  // under evict_first (v47) it is faster up to 32 and still slower at 64 on
  // the 0.3b (hidden 1,024; bf16 on an H100, device-greedy step ms, three
  // rounds at 16 and two at 32 / 64, NOTES.md v48 - v49: 16 rows 0.524 -
  // 0.526 against cuBLAS's 0.536 - 0.539, 32 rows 0.546 - 0.549 against
  // 0.563 - 0.567, 64 rows 0.802 - 0.806 against 0.795 - 0.797). The
  // 21B-A3B's (hidden 2,560) is slower on it (AWQ at 16 rows on an H200, two
  // rounds, NOTES.md v50: 4.449 / 4.459 against cuBLAS's 4.424 / 4.409).
  int small_batch_lm_head_max_rows = -1;
  // Dense bf16 models, steps on the small-batch GEMM: the residual add +
  // RMSNorm after o_proj and down_proj split over the linears around it (the
  // one before adds into the residual and writes x * g with each CTA's sum
  // of squares, the one after scales each row by its norm: small_batch_gemm.h
  // SmallBatchRowNorm), two kernels fewer a layer. False: the norm kernels
  // (the before).
  bool small_batch_norm_epilogues = true;
  // Dense bf16 models: a one-token step (batch-1 decode) at a context of at
  // most persistent_decode_max_context keys (capped at 1,024) runs as one
  // persistent kernel, its phases separated by grid barriers instead of
  // ~110 kernel boundaries (kernels/persistent_decode.h). Off, or a model
  // or device it does not fit: the per-layer kernels. Off by default until
  // it measures faster (NOTES.md v23).
  bool persistent_decode = false;
  int64_t persistent_decode_max_context = 1024;
  // Greedy rows without logprobs take kernels/greedy_rows.h (each row's
  // argmax over every free SM; a min_tokens ban is already in the row) instead
  // of the sampling kernel's cluster of up to 8 CTAs a row. False: the
  // sampling kernel (the before). Measured (NOTES.md v27): 0.460 -> 0.455 ms
  // a 0.3b step at batch 1, 0.754 -> 0.743 at 64.
  bool fast_greedy_sampling = true;
  // Overlapped steps (Backend::LaunchForwardAndSample): a launch enqueues
  // the step and returns; its wait reads the tokens. The engine then plans
  // step N+1 while the GPU runs step N (EngineConfig::overlap_steps). False:
  // every launch runs its step to the end (the before). Measured (NOTES.md
  // v30, one H100, the 0.3b through EngineCore): +0.7% / +6.3% / +9 - 12%
  // tok/s at 1 / 64 / 256 streams.
  bool overlap_steps = true;
  // MoE models: tokens one pass of the expert kernels takes (bounds the
  // per-slot workspace, ~100 KB a token on the 21B-A3B shape); larger steps
  // go in chunks.
  int64_t moe_chunk_tokens = 1024;
  // MoE models: the largest tile (rows sharing one read of an expert's
  // weights) the grouped expert kernels may use: 8, 16, 32 or 64. Steps pick
  // from the mean tokens per expert up to this. 0: by the experts' format,
  // as measured on the 21B-A3B shape (NOTES.md v16, same run): bf16 64
  // (prefill in 2,048-token steps 26,112 / 29,979 / 29,240 -> 30,476 /
  // 36,220 / 35,303 tok/s for 16 / 64 / 256 prompts, decode unchanged), AWQ
  // int4 32 (64-row tiles: prefill no faster, batch 256 decode 18,190 ->
  // 13,766 tok/s: the int4 GEMM's dequantisation per weight byte is the
  // same, its tiles fewer and larger).
  int moe_max_tile_rows = 0;
  // MoE models with bf16 shared experts: chunks of at least this many tokens
  // run the shared experts as a dense MLP on cuBLAS (their weights read once)
  // instead of as pseudo-experts in the grouped launches (read once per tile
  // of 32 tokens).
  int64_t moe_shared_gemm_min_tokens = 128;
  // MoE models: routed tiles of at least this many slots (8, 16, 32 or 64)
  // run the grouped tensor-core GEMMs (kernels/grouped_expert_gemm.h for
  // bf16 experts, grouped_awq_gemm.h for AWQ int4) instead of the grouped
  // GEMVs; -1: never (to measure the GEMVs against them); 0: by the
  // experts' format, as measured on the 21B-A3B shape (NOTES.md v9): bf16
  // from 8 slots (batch 1 281 -> 306 tok/s, 16 1,290 -> 1,469), AWQ int4
  // from 16 (at 8 slots the int4 GEMV's deeper load pipeline wins, 393
  // against 338 tok/s at batch 1).
  int moe_grouped_gemm_min_rows = 0;
  // MoE models with AWQ int4 experts: the k slices of the grouped int4 GEMV
  // (1, 2, 4 or 8; kernels/grouped_awq_gemv.h), or 0: sized by the tiles the
  // step expects (1 at batch 1). To measure the split; the GEMM ignores it.
  int moe_awq_gemv_k_slices = 0;
  // The same GEMV's warps a CTA (1 - 8, a multiple of its k slices), or 0:
  // 8 for a one-token step (the 21B-A3B AWQ batch-1 step 1.8% faster on an
  // H100 than the spread below, NOTES.md v41), 6 for steps of 3 - 8 tokens
  // (2.6% faster at 3, 3.1% at 4, 0.5% at 8, v42), else sized so that a
  // small step's CTAs spread evenly over the SMs (kernels/grouped_awq_gemv.h).
  // To measure it; the GEMM ignores it.
  int moe_awq_gemv_cta_warps = 0;
  // The same GEMV's tiles of 8 slots (steps of up to ~50 tokens; x staged,
  // groups >= 128) on the lean k loop: one chunk in flight a warp with three
  // CTAs an SM instead of two chunks with two, so the k split doubles and
  // each scheduler has twice the warps (kernels/awq_blocks.cuh
  // kAwqLeanInFlight). 21B-A3B AWQ device-greedy step on an H100 (NOTES.md
  // v36): 1.71 -> 1.67 ms at batch 1, 2.26 -> 2.08 at 2, 4.12 -> 3.94 at 8,
  // 7.51 -> 7.12 at 32. Off: the two-chunk loop (the before). The early
  // shared experts' launches (moe_early_shared_experts 1 - 3) keep that loop.
  bool moe_awq_gemv_lean = true;
  // MoE steps of one token route in one thread-block cluster whose logits
  // meet in one CTA's shared memory (kernels/moe_routing.h), instead of the
  // last-CTA handoff through L2; off: the handoff (the before of NOTES.md v31).
  bool moe_route_cluster = true;
  // MoE steps of one token with AWQ experts: what the grouped gate/up GEMV's
  // CTAs for the shared experts (whose tiles are known before the routing
  // ends: kernels/grouped_awq_gemv.h) do while the routing runs. 0: wait for
  // it like the others; 1: ask the L2 for their weights first; 2: normalise
  // the token's residual themselves and compute their tiles without waiting
  // (the routing then lets its dependents start only once its own input is
  // ready); 3: as 2, and the down launch's CTAs for them start once those
  // gate/up CTAs have counted in, not after the whole gate/up launch.
  // 2 measured fastest on an H100 (NOTES.md v34: 21B-A3B AWQ batch 1
  // 1.838 / 1.817 / 1.797 / 1.799 ms at 0 / 1 / 2 / 3) but slower on the
  // H200 the issues' targets are set on (v35: means of three rounds 1.652 /
  // 1.689 / 1.691 ms at 0 / 2 / 3): 0.
  int moe_early_shared_experts = 0;
  // MoE steps of one token with AWQ experts and an AWQ o_proj (at most 64
  // routed experts, experts on the one-token GEMV): no routing launch. The
  // o_proj that completes the residual writes router records (each cluster
  // of its CTAs' dots of the router with their rows, and their sum of
  // squares), and the experts' gate/up and down launches and the combine
  // each choose the token's experts from them (kernels/moe_routing.h
  // MoeRouterRecords). Same choices as the routing launch except where two
  // biased scores tie to float rounding. Off: the routing launch. Takes the
  // place of moe_early_shared_experts where both are asked for. On by
  // default: with the records read in one L2 round trip and the gate/up
  // launch publishing each tile's expert for the down launch, the 21B-A3B
  // AWQ step at batch 1 is ~2.8% faster on an H100 (NOTES.md v43; the H200
  // has not measured it).
  bool moe_fold_routing = true;
  // With moe_fold_routing: the o_proj's clusters (and so its records) are
  // the largest power of two up to this (1, 2, 4, 8 or 16: 16 is a
  // non-portable cluster size that Hopper runs; a device that cannot is
  // refused at start) that divides its CTAs; fewer CTAs a cluster make
  // shorter barriers and more records to read. -1 (the default): 16 where
  // the device runs clusters of 16, else the portable 8. On an H100 16
  // took the 21B-A3B AWQ step at batch 1 to 1.470 - 1.478 ms from 8's
  // 1.488 - 1.493 (three rounds alternated, NOTES.md v45).
  int moe_router_record_cluster = -1;
  // With moe_fold_routing: the gate/up launch's CTAs of the shared experts'
  // tiles (known without a choice) ask the L2 for their weight slices before
  // they wait for the o_proj, so fewer of its bytes come from HBM after it.
  // On by default: the 21B-A3B AWQ batch-1 step 1.484 - 1.494 ms against
  // 1.502 - 1.509 on an H100, three rounds alternated (NOTES.md v44; the
  // H200 has not measured it).
  bool moe_fold_prefetch_shared = true;
  // With moe_fold_routing: the down launch's CTAs ask the L2 for their
  // expert's weight slice as soon as they know the expert (under the gate/up
  // launch's tail), not only for their first chunks.
  bool moe_fold_prefetch_down = false;
  // Decode steps of at most kv_prefetch_max_seqs sequences (on the fused
  // decode linears): the q|k|v launch's first CTAs ask the L2 for the keys
  // and values of earlier steps that the attention after it reads
  // (DecodeRotaryKv::prefetch_items), since the attention's own CTAs start
  // too late to have them from HBM by the time q is ready. 0: off. 1 by
  // default: the 0.3b bf16 batch-1 step 0.469 - 0.471 ms against 0.474 -
  // 0.477 on an H100, three rounds alternated; batch 2 and the 21B-A3B AWQ
  // at batch 1 unchanged (NOTES.md v45).
  int kv_prefetch_max_seqs = 1;
  // Decode steps of at least stream_kv_min_items sequences read the KV
  // cache with an L2 evict_first policy
  // (PagedAttentionParams::stream_kv): from 16 decodes a 0.3b step's keys
  // and values (~56 MB at 192 keys) outgrow the 50 MB L2 and only push out
  // what the next kernels re-read. 0: never. The step's graph key (its item
  // count) carries the choice. On an H100 (NOTES.md v47): the 0.3b bf16 at
  // 256 sequences 1.425 - 1.445 ms against 1.469 - 1.471 with 0, 16 and 64
  // unchanged; the 21B-A3B AWQ at 16 and 64 0.3% faster.
  int stream_kv_min_items = 16;
  // The lm_head's cuBLAS GEMM (logit rows past the small-batch lm_head):
  // at start, cuBLAS's default is timed against cuBLASLt's heuristic
  // candidates (no split-k, no workspace) at a dozen bucket row counts
  // (gemm_tuning.h: 1, 2, 4, 8, 16, 24, 32, 48, 64, 96, ... up to
  // max_logit_rows), and each bucket keeps the fastest when it is at least
  // 2% faster; a pass of exactly a bucket's rows takes its kept algorithm,
  // other row counts the default (tuned_gemm.h). A few ms a bucket, never in a request's step. On an
  // H100 (ernie-bench-gemm-algos, NOTES.md v52) the default left 5 - 10% of
  // the lm_head's time at 48 - 256 rows on both models. False: cuBLAS's
  // default always (the before); steps are then the same bits run to run,
  // where a tuned algorithm may differ between starts in the sums' rounding.
  bool lm_head_gemm_tuning = true;
};

// Where the device memory went (bytes), for the start-up report and metrics.
struct CudaMemoryBreakdown {
  int64_t weights = 0;
  int64_t kv_cache = 0;
  int64_t workspace = 0;  // activations, logits, step inputs, cuBLAS scratch
};

class CudaBackend : public Backend {
 public:
  virtual CudaMemoryBreakdown memory() const = 0;
  // What the lm_head's tuning at start found, one entry a bucket
  // (CudaBackendOptions::lm_head_gemm_tuning), smallest first.
  virtual std::vector<GemmTuning> lm_head_tunings() const = 0;
  // Graphs captured, replayed and eager steps: Backend::step_counters().
};

// Devices the CUDA runtime sees; 0 (not an error) without a device or driver.
int CudaDeviceCount();

// Uploads `model`'s weights and allocates the KV pool and workspaces.
// FailedPrecondition without a device; ResourceExhausted when the device is
// out of memory (naming the buffer); InvalidArgument for options or a model
// shape the kernels do not cover (e.g. "unsupported head_dim 96").
// `model` need not outlive the backend (the weights are copied).
absl::StatusOr<std::unique_ptr<CudaBackend>> CreateCudaBackend(const LoadedModel& model,
                                                                const CudaBackendOptions& options);

}  // namespace ernie

// The CUDA backend's state (private to engine/backend/cuda): device weights,
// the KV pool, the workspaces and the stream. cuda_backend.cc creates it and
// copies blocks; cuda_forward.cc holds the forward pass.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <deque>
#include <optional>
#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"
#include "engine/backend/cuda/cuda_backend.h"
#include "engine/backend/cuda/device_buffer.h"
#include "engine/backend/cuda/device_sampler.h"
#include "engine/backend/cuda/device_weights.h"
#include "engine/backend/cuda/gemm.h"
#include "engine/backend/cuda/graph_cache.h"
#include "engine/backend/cuda/kernels/decode_linear.h"
#include "engine/backend/cuda/kernels/mma_attention.h"
#include "engine/backend/cuda/kernels/persistent_decode.h"
#include "engine/backend/cuda/kernels/small_batch_gemm.h"
#include "engine/backend/cuda/paged_kv_view.h"
#include "engine/backend/cuda/step_plan.h"
#include "engine/backend/cuda/tuned_gemm.h"

namespace ernie::cuda {

// Owns a cudaStream_t (destroyed after every member that enqueues on it).
class Stream {
 public:
  Stream() = default;
  explicit Stream(cudaStream_t s) : stream_(s) {}
  Stream(Stream&& o) noexcept : stream_(std::exchange(o.stream_, nullptr)) {}
  Stream& operator=(Stream&&) = delete;
  ~Stream() {
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }
  cudaStream_t get() const { return stream_; }

 private:
  cudaStream_t stream_ = nullptr;
};

// Owns a cudaEvent_t without timing (a marker a wait synchronises on).
class Event {
 public:
  Event() = default;
  Event(Event&& o) noexcept : event_(std::exchange(o.event_, nullptr)) {}
  Event& operator=(Event&& o) noexcept {
    std::swap(event_, o.event_);
    return *this;
  }
  ~Event() {
    if (event_ != nullptr) cudaEventDestroy(event_);
  }
  static absl::StatusOr<Event> Create() {
    Event e;
    ERNIE_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&e.event_, cudaEventDisableTiming), "cudaEventCreate");
    return e;
  }
  cudaEvent_t get() const { return event_; }

 private:
  cudaEvent_t event_ = nullptr;
};

// A bf16 buffer as the kernels take it; an optional float buffer (a bias)
// as a pointer, null when the buffer is empty.
inline __nv_bfloat16* Bf16(const DeviceBuffer<uint16_t>& b) { return reinterpret_cast<__nv_bfloat16*>(b.data()); }
inline const float* OrNull(const DeviceBuffer<float>& b) { return b.size() == 0 ? nullptr : b.data(); }

// Activations of one step, sized for max_tokens_per_step (T) rows.
struct Workspace {
  DeviceBuffer<float> x;          // [T, H] residual stream, float32
  DeviceBuffer<uint16_t> h;       // bf16 [T, H] normed input of the next GEMM (also the final-norm rows)
  DeviceBuffer<float> qkv;        // [T, (heads + 2 kv_heads) * head_dim] QKV GEMM output; q rotated in place
  DeviceBuffer<uint16_t> attn;    // bf16 [T, heads * head_dim] attention output
  DeviceBuffer<float> proj;       // [T, H] o_proj or down_proj output, before the residual add
  DeviceBuffer<float> norm_sumsq;  // RowNormSumsqFloats(H): a split norm's partial sums of squares
  DeviceBuffer<float> gate_up;    // [T, 2 I] gate|up GEMM output
  DeviceBuffer<uint16_t> act;     // bf16 [T, I] silu(gate) * up
  DeviceBuffer<float> attn_partial_out;  // split-KV partial outputs [PagedAttentionPartialCtas, rows per item, head_dim]
  DeviceBuffer<float> attn_partial_ml;   // their (max, sum) [PagedAttentionPartialCtas, rows per item, 2]
  DeviceBuffer<uint16_t> awq_weights;  // bf16 [n, k] of the largest AWQ linear or expert linear, dequantised for large steps; else empty
  DeviceBuffer<float> logits;     // [logit_rows_per_pass, V]
  DeviceBuffer<float> inv_freq;   // [head_dim / 2] rotary inverse frequencies
  // MoE layers only (else empty), sized for one chunk of C = moe_chunk_tokens
  // tokens (cuda_moe_forward.cc) with K = top_k + shared choices a token:
  // S = MoeSlotCapacity(C K, E + shared, kMoeMaxTileRows) slots.
  DeviceBuffer<float> moe_logits;          // [C, E] router logits
  DeviceBuffer<int32_t> moe_topk_ids;      // [C, K]
  DeviceBuffer<float> moe_topk_weights;    // [C, K]
  DeviceBuffer<int32_t> moe_slot_token;    // [S] token of each slot (-1: padding)
  DeviceBuffer<int32_t> moe_slot_of;       // [C, K] slot of each assignment
  DeviceBuffer<int32_t> moe_tile_expert;   // [S / 8]
  DeviceBuffer<int32_t> moe_num_tiles;     // [1]
  DeviceBuffer<uint32_t> moe_route_arrivals;  // [1] the fused routing kernel's CTA count (zeroed at start)
  // [1] one-token steps with moe_early_shared_experts 3: the shared experts'
  // gate/up row tiles done (GroupedAwqGemvParams::known_done; zeroed at start
  // and by each MoE layer's combine).
  DeviceBuffer<uint32_t> moe_shared_ready;
  // [H / 16, MoeRouterRecordStride(E)] one-token steps with moe_fold_routing:
  // the o_proj's router records (at most one a 16-row tile of the residual).
  DeviceBuffer<float> moe_router_records;
  // [1] the same steps' flag: the gate/up launch published each tile's expert
  // in moe_tile_expert (MoeRouterRecords::tiles_ready; zeroed at start and by
  // each MoE layer's combine).
  DeviceBuffer<uint32_t> moe_fold_ready;
  DeviceBuffer<uint16_t> moe_act;          // bf16 [S, Im] silu(gate) * up of each slot
  DeviceBuffer<float> moe_expert_out;      // [S, H] down projection of each slot
  // The persistent one-token decode kernel's (empty where it is not used).
  DeviceBuffer<PersistentDecodeLayer> persistent_layers;  // [num_layers] device pointers
  DeviceBuffer<float> persistent_partial;   // [PersistentDecodePartialFloats] split attention partials
  DeviceBuffer<unsigned long long> persistent_barrier;  // [1] its grid barrier's arrival count
  DeviceBuffer<int32_t> copies;   // [kMaxCopiesPerLaunch, 3] block copies of one launch
  PinnedBuffer<int32_t> copies_staging;  // host side of `copies`

  int64_t bytes() const {
    return static_cast<int64_t>(x.bytes() + h.bytes() + qkv.bytes() + attn.bytes() + proj.bytes() + norm_sumsq.bytes() + gate_up.bytes() +
                                act.bytes() + attn_partial_out.bytes() + attn_partial_ml.bytes() + awq_weights.bytes() + logits.bytes() + inv_freq.bytes() + copies.bytes() +
                                moe_logits.bytes() + moe_topk_ids.bytes() + moe_topk_weights.bytes() +
                                moe_slot_token.bytes() + moe_slot_of.bytes() + moe_tile_expert.bytes() +
                                moe_num_tiles.bytes() + moe_route_arrivals.bytes() + moe_shared_ready.bytes() +
                                moe_router_records.bytes() + moe_fold_ready.bytes() + moe_act.bytes() +
                                moe_expert_out.bytes() +
                                persistent_layers.bytes() + persistent_partial.bytes() + persistent_barrier.bytes());
  }
};

inline constexpr int32_t kMaxCopiesPerLaunch = 1024;

class CudaBackendImpl final : public CudaBackend {
 public:
  std::string_view name() const override { return "cuda"; }
  const KvCacheShape& kv_shape() const override { return kv_shape_; }
  int64_t vocab_size() const override { return config_.vocab_size; }
  int64_t max_tokens_per_step() const override { return max_tokens_; }
  CudaMemoryBreakdown memory() const override { return memory_; }
  std::vector<GemmTuning> lm_head_tunings() const override {
    return lm_head_gemm_.has_value() ? lm_head_gemm_->tunings() : std::vector<GemmTuning>{};
  }
  BackendStepCounters step_counters() const override {
    return {.graph_replays = graphs_.replays(),
            .graph_captures = graphs_.captured(),
            .eager_steps = graphs_.direct_runs() + ungraphed_steps_,
            .persistent_steps = persistent_steps_};
  }
  absl::Status Forward(const StepBatch& batch, std::span<float> logits) override;
  bool SupportsDeviceSampling() const override { return true; }
  // cuda_sample_step.cc
  absl::Status ForwardAndSample(const StepBatch& batch, const DeviceSamplingRequest& request,
                                std::span<SampledToken> sampled) override;
  absl::Status LaunchForwardAndSample(const StepBatch& batch, const DeviceSamplingRequest& request) override;
  absl::Status WaitForSamples(std::span<SampledToken> sampled) override;
  bool OverlapsSteps() const override { return overlap_steps_; }
  absl::Status CopyBlocks(std::span<const BlockCopyOp> copies) override;
  absl::StatusOr<int32_t> WarmUp(int32_t max_sequences) override;  // graph_warmup.cc
  ~CudaBackendImpl() override;

  // What CreateCudaBackend does (cuda_backend.cc).
  static absl::StatusOr<std::unique_ptr<CudaBackend>> Create(const LoadedModel& model,
                                                             const CudaBackendOptions& options);

 private:
  CudaBackendImpl(const ModelConfig& config, Stream stream, Gemm gemm)
      : config_(config), stream_(std::move(stream)), gemm_(std::move(gemm)) {}

  // Called once per lm_head pass with the pass's logits rows
  // [first_row, first_row + rows) in ws_.logits (enqueued, not yet run).
  using LogitPassConsumer = absl::FunctionRef<absl::Status(int32_t first_row, int32_t rows)>;

  // Forward's steps (cuda_forward.cc); each enqueues on stream_.
  absl::Status RunStep(const StepBatch& batch, LogitPassConsumer consume_pass);
  // ForwardAndSample's use of one pass (cuda_sample_step.cc).
  absl::Status SamplePass(int32_t first_row, int32_t rows, const DeviceSamplingRequest& request,
                          std::span<SampledToken> sampled);
  // The whole step, synchronously, with fed-back tokens filled in from the
  // host's copy of the last launch's (ForwardAndSample's and a launch's that
  // cannot be enqueued).
  absl::Status RunSampledStep(const StepBatch& batch, const DeviceSamplingRequest& request,
                              std::span<SampledToken> sampled);
  // Reads every launched step still on the device into its results (before
  // anything that reuses the sampler's staging slots).
  absl::Status ReadLaunchedSteps();
  absl::Status EnqueueLayers(int32_t tokens);
  // y [m, n] (float32, or bf16 when `out` says so) = x [m, k] bf16 times a
  // layer linear: `bf16` through cuBLAS, or `awq` when it is not empty
  // (cuda_linear.cc).
  absl::Status RunLinear(const uint16_t* x, int64_t m, int64_t k, const DeviceBuffer<uint16_t>& bf16,
                         const DeviceAwqLinear& awq, int64_t n, void* y, GemmOutput out = GemmOutput::kF32);
  // The row-wise work after a linear that its kernel may do instead, where
  // the small-batch GEMM takes the step (small_batch_gemm.h's epilogues).
  struct LinearEpilogue {
    SmallBatchEpilogue kind = SmallBatchEpilogue::kStore;
    void* y = nullptr;            // kSiluMul: where silu(g) * u goes, [m, n / 2] as `out` says
    const float* bias = nullptr;  // the linear's bias, or nullptr
    DecodeRotaryKv rotary;        // kRotaryKv: as decode_linear.h's
    // kAddResidualNorm (y is the residual stream) and an input norm's row
    // scale: the small-batch GEMM only, so the call fails where it is not taken.
    SmallBatchNormOut norm_out;
    SmallBatchRowNorm row_norm;
  };
  // RunLinear, with `epilogue` done by the linear's kernel where it can be:
  // true when it was (the caller skips its own row-wise kernel), false when
  // y holds the plain product (bias not added) as RunLinear leaves it.
  absl::StatusOr<bool> RunLinearWithEpilogue(const uint16_t* x, int64_t m, int64_t k,
                                             const DeviceBuffer<uint16_t>& bf16, const DeviceAwqLinear& awq, int64_t n,
                                             void* y, GemmOutput out, const LinearEpilogue& epilogue);
  absl::Status AttentionBlock(int64_t layer, int32_t tokens);
  // x += ws_.proj (+ proj_bias), then h = RMSNorm(x) with `norm`: the
  // residual add after o_proj or down_proj where no linear's epilogue did it.
  absl::Status AddProjAndNorm(const float* proj_bias, const DeviceBuffer<float>& norm, int32_t tokens);
  // Rotary + KV write and attention of one layer, from ws_.qkv to ws_.attn.
  absl::Status RotaryAndAttention(int64_t layer, int32_t tokens);
  // Attention alone, once rotary and the KV write are done (the decode path
  // folds them into its qkv GEMV).
  // The kernel shape follows the uploaded step's items (AttentionItemsOf).
  absl::Status Attention(int64_t layer);
  // Split-KV CTAs per (item, KV head) for a step of `num_items` attention
  // items, by that count alone (a captured graph fits every context); 1 is
  // no split. The graph warm-up asks it for steps not yet uploaded.
  int32_t SplitsByItemCount(int32_t num_items) const;
  // Whether a step of `num_items` items (`single_token`: one token each, a
  // decode step) takes the wide decode attention kernel when its contexts
  // are short (CudaBackendOptions::wide_decode_attention_max_pairs).
  bool WideDecodeAttention(bool single_token, int32_t num_items) const;
  // Whether the step's attention reads its keys and values with an L2
  // evict_first policy (CudaBackendOptions::stream_kv_min_items); like the
  // items' kind and count, the same for every replay of a graph key.
  bool StreamKv(AttentionItems items, int32_t num_items) const;
  // The longest context (keys) at which such a step runs attention unsplit
  // (the graph key's short-context bit): the unsplit rule's where the item
  // count would split, the wide kernel's; 0 where neither applies.
  int64_t ShortAttentionContext(bool single_token, int32_t num_items) const;
  // Query rows of one attention work item: the size of the kernel in use.
  int32_t AttentionRowsPerItem() const { return mma_attention_ ? kMmaAttentionRows : kAttentionRowsPerCta; }
  absl::Status MlpBlock(int64_t layer, int32_t tokens);
  // Whether a step of `tokens` tokens on the unfused path (EnqueueLayers)
  // splits its norms over the linears (small_batch_gemm.h's kAddResidualNorm
  // and row norm): the option is on, the model's four linears take the
  // small-batch GEMM at that size (dense bf16), and so the residual add +
  // RMSNorm kernels after o_proj and down_proj are left out.
  bool NormEpiloguesFor(int32_t tokens) const;
  // What the linear after a kAddResidualNorm launch needs (ws_.norm_sumsq).
  SmallBatchRowNorm SplitRowNorm() const;
  // kAddResidualNorm's outputs for the norm with weight g: x * g into ws_.h.
  SmallBatchNormOut SplitNormOut(const DeviceBuffer<float>& g) const;
  // out (+)= the mixture-of-experts MLP of layer `layer` on h's `tokens`
  // bf16 rows, in chunks of moe_chunk_tokens_ (cuda_moe_forward.cc). With
  // `normalize_into_h`, h is written first, RMSNorm(ws_.x) by the router
  // kernel, instead of read as the caller's.
  // `folded` (one token, CudaBackendOptions::moe_fold_routing): the o_proj
  // wrote these router records, and the block chooses from them instead of
  // launching the routing (h is then neither read nor written).
  absl::Status MoeBlock(int64_t layer, int32_t tokens, uint16_t* h, bool normalize_into_h, float* out,
                        bool accumulate, const MoeRouterRecords* folded = nullptr);
  // The router records layer `layer`'s o_proj writes for a decode step of
  // `tokens` rows, or records nullptr where the routing is not folded:
  // CudaBackendOptions::moe_fold_routing, one token, AWQ experts on the
  // one-token GEMV with x staged and an AWQ o_proj.
  absl::StatusOr<MoeRouterRecords> FoldedRouterRecords(int64_t layer, int32_t tokens,
                                                       const DecodeLinearParams& o_proj) const;
  // The experts of one routed chunk (tiles of 8 slots) as one cuBLAS GEMM per
  // expert; waits for the routing (large, ungraphed steps only).
  // out += the shared experts (bf16) of `tokens` rows of h as one dense MLP
  // on cuBLAS: the gate|up GEMM over all S pseudo-experts at once, SiLU, and
  // one accumulating down GEMM per pseudo-expert.
  absl::Status SharedExpertsByGemm(int64_t layer, const __nv_bfloat16* h, int32_t tokens, float* out);
  // The same as the two grouped launches (bf16 or AWQ int4 experts), no host wait.
  // What a one-token chunk's shared experts do while the routing runs
  // (CudaBackendOptions::moe_early_shared_experts; GroupedAwqGemvParams::known_tiles).
  struct EarlySharedExperts {
    int32_t tile0 = -1;        // their first tile; -1: not known (not a one-token chunk)
    const float* x = nullptr;  // the token's float32 residual, normalised by their gate/up CTAs (2, 3)
    bool count_in = false;     // their down CTAs start once those have counted in (3)
  };
  absl::Status GroupedExperts(int64_t layer, const __nv_bfloat16* h, int32_t tokens, int32_t max_tiles,
                              int32_t tile_rows, int32_t expected_tiles, const EarlySharedExperts& early,
                              const MoeRouterRecords* folded = nullptr);
  // Whether tiles of tile_rows slots go to the tiled expert GEMMs (else the grouped GEMVs).
  bool ExpertsTiled(const DeviceMoeWeights& w, int32_t tile_rows) const;
  absl::Status EnqueueLogitPass(int32_t first_row, int32_t rows);
  // The final norm of logit rows (adding delta + delta_bias when delta is set) and lm_head on cuBLAS.
  absl::Status NormAndLmHead(int32_t first_row, int32_t rows, const float* delta, const float* delta_bias);
  // NormAndLmHead's cuBLAS lm_head: the kept algorithm where `rows` is a
  // tuning bucket whose candidate won, else cuBLAS's default (cuda_forward.cc).
  absl::Status CublasLmHead(int32_t rows);
  // Times the lm_head's algorithms at each tuning bucket (gemm_tuning.h), at
  // the end of Create; nothing when CudaBackendOptions::lm_head_gemm_tuning is off.
  absl::Status TuneLmHead();
  // The same two for steps of at most kDecodeLinearMaxRows tokens (cuda_decode_forward.cc).
  absl::Status EnqueueDecodeLayers(int32_t tokens);
  // One fused decode linear on the layer's bf16 weights (p.w), or on `awq`
  // when it is not empty; `what` names it in the error.
  absl::Status DecodeLinear(DecodeLinearParams p, const DeviceAwqLinear& awq, const char* what,
                            int64_t layer);
  absl::Status EnqueueDecodeLogitPass(int32_t first_row, int32_t rows);
  absl::Status CopyLogits(int32_t first_row, int32_t rows, std::span<float> logits);
  // The persistent one-token decode kernel (cuda_persistent_decode.cc):
  // set up at start where the model and device allow (else left off);
  // whether a step of `tokens` tokens, `rows` logit rows and that largest
  // position takes it; the step as that one launch.
  absl::Status SetUpPersistentDecode(const CudaBackendOptions& options);
  PersistentDecodeParams PersistentDecodeShape() const;
  bool TakesPersistentDecode(int32_t tokens, int32_t rows, int64_t max_position) const;
  absl::Status EnqueuePersistentDecode(int32_t rows);
  absl::Status CopyBlocksChunk(std::span<const BlockCopyOp> copies);
  PagedKvView LayerCache(int64_t layer) const;

  ModelConfig config_;      // a copy: the backend does not need the LoadedModel after start
  int device_ = 0;          // made current on the calling thread by every entry point
  KvCacheShape kv_shape_;   // bytes_per_element 2 (bf16)
  int64_t max_tokens_ = 0;
  int64_t logit_rows_per_pass_ = 0;
  float attn_scale_ = 1.0f;  // head_dim ^ -0.5
  int32_t num_sms_ = 1;      // the device's SMs: how many attention CTAs fill it
  int32_t max_attention_splits_ = 1;  // CudaBackendOptions::max_attention_splits
  int64_t unsplit_attention_max_context_ = 0;  // CudaBackendOptions::unsplit_attention_max_context
  int32_t unsplit_attention_min_pairs_ = 1;    // CudaBackendOptions::unsplit_attention_min_pairs
  int64_t wide_decode_attention_max_pairs_ = 0;  // CudaBackendOptions::wide_decode_attention_max_pairs
  bool step_unsplit_attention_ = false;        // this step's contexts are all that short (RunStep)
  bool step_wide_attention_ = false;           // and it takes the wide decode kernel (RunStep)
  bool norm_epilogue_shapes_ = false;  // CudaBackendOptions::small_batch_norm_epilogues, and the model allows it
  bool mma_attention_ = false;         // tensor-core attention: the option, and the head dim allows it
  bool decode_swap_ab_ = true;         // CudaBackendOptions::decode_attention_swap_ab
  bool decode_single_wave_ = true;     // CudaBackendOptions::decode_linear_single_wave
  int64_t ungraphed_steps_ = 0;        // steps too large for a graph (RunStep), for step_counters()
  int32_t decode_max_rows_ = 0;        // steps of at most this many tokens take the fused decode kernels
  int32_t persistent_decode_skip_ = 0;         // PersistentDecodeParams::skip (a diagnostic, from the environment)
  int64_t persistent_steps_ = 0;               // steps that took it, for step_counters()
  int64_t persistent_decode_max_context_ = 0;  // one-token steps up to this context take the persistent kernel; 0: off
  int32_t cluster_decode_max_rows_ = 0;  // and, above decode_max_rows_, up to this many (cluster kernel)
  int32_t small_batch_gemm_max_rows_ = 0;  // CudaBackendOptions::small_batch_gemm_max_rows
  int32_t awq_tiled_gemm_max_rows_ = 0;    // CudaBackendOptions::awq_tiled_gemm_max_rows
  int32_t awq_small_batch_min_rows_ = 17;  // CudaBackendOptions::awq_small_batch_gemm_min_rows
  int32_t awq_small_batch_max_rows_ = 0;   // CudaBackendOptions::awq_small_batch_gemm_max_rows
  int32_t small_batch_lm_head_max_rows_ = 0;  // CudaBackendOptions::small_batch_lm_head_max_rows
  int32_t awq_tiled_gemm_tile_rows_ = 64;  // CudaBackendOptions::awq_tiled_gemm_tile_rows
  int32_t moe_chunk_tokens_ = 0;       // tokens one pass of MoeBlock takes (its workspace); 0 for dense models
  int32_t moe_max_tile_rows_ = 32;     // CudaBackendOptions::moe_max_tile_rows
  int32_t moe_grouped_gemm_min_rows_ = 0;  // CudaBackendOptions::moe_grouped_gemm_min_rows
  int32_t moe_awq_gemv_k_slices_ = 0;      // CudaBackendOptions::moe_awq_gemv_k_slices
  int32_t moe_awq_gemv_cta_warps_ = 0;     // CudaBackendOptions::moe_awq_gemv_cta_warps
  bool moe_awq_gemv_lean_ = true;          // CudaBackendOptions::moe_awq_gemv_lean
  bool moe_route_cluster_ = true;          // CudaBackendOptions::moe_route_cluster
  int moe_early_shared_experts_ = 0;       // CudaBackendOptions::moe_early_shared_experts
  bool moe_fold_routing_ = false;          // CudaBackendOptions::moe_fold_routing
  bool moe_fold_prefetch_shared_ = false;  // CudaBackendOptions::moe_fold_prefetch_shared
  int32_t kv_prefetch_max_seqs_ = 0;       // CudaBackendOptions::kv_prefetch_max_seqs
  int32_t stream_kv_min_items_ = 0;        // CudaBackendOptions::stream_kv_min_items
  bool moe_fold_prefetch_down_ = false;    // CudaBackendOptions::moe_fold_prefetch_down
  int32_t moe_router_record_cluster_ = 8;  // chosen at start from CudaBackendOptions::moe_router_record_cluster
  int64_t moe_shared_gemm_min_tokens_ = 0;  // CudaBackendOptions::moe_shared_gemm_min_tokens
  CudaMemoryBreakdown memory_;

  Stream stream_;   // every kernel, copy and GEMM of the backend runs on it, in order
  Gemm gemm_;       // cuBLAS handle bound to stream_
  // CudaBackendOptions::lm_head_gemm_tuning: the lm_head's algorithms by
  // row count and what each bucket's timing found (none when off).
  std::optional<TunedGemm> lm_head_gemm_;
  GraphCache graphs_{0};          // whole-step graphs of steps up to graph_max_tokens_ tokens
  int64_t graph_max_tokens_ = 0;  // 0: graphs off
  DeviceWeights weights_;
  // [num_layers, 2 (k, v), num_blocks, num_kv_heads, block_size, head_dim] bf16.
  DeviceBuffer<uint16_t> kv_cache_;
  Workspace ws_;
  StepInputs inputs_;  // the step's integer inputs, host staging + device copy
  DeviceSampler sampler_;  // samples rows of ws_.logits for ForwardAndSample
  int64_t inputs_logit_rows_ = 0;  // logits rows of the step ForwardAndSample is running
  // Overlapped steps (cuda_sample_step.cc): launched steps not yet waited
  // for, oldest first; on_device: its tokens are still on the device (the
  // sampler's pending slot, done when `done` is), else in `sampled`.
  struct LaunchedStep {
    std::vector<SampledToken> sampled;
    bool on_device = false;
    int event = 0;        // its launch_done_ entry, when on_device
    absl::Status status;  // a failure found while reading it early
  };
  bool overlap_steps_ = false;  // CudaBackendOptions::overlap_steps
  std::deque<LaunchedStep> launched_;
  Event launch_done_[2];        // recorded after each enqueued step, in turn
  int next_launch_event_ = 0;
  // The newest launch's sampled ids: in the sampler's device buffers when
  // it was enqueued (RunStep feeds them back there), else on the host.
  LaunchedTokens last_launch_;
};

}  // namespace ernie::cuda

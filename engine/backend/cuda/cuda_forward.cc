// The dense ERNIE-4.5 forward pass on the GPU, layer by layer, the same
// function as engine/backend/cpu/cpu_backend.cc:
//   x = embed(ids)
//   per layer: x += o_proj(attention(rope(q), rope(k), v)) on RMSNorm(x)
//              x += down(silu(gate(h)) * up(h)) on h = RMSNorm(x)
//                   (MoE layers: the mixture of experts, cuda_moe_forward.cc)
//   logits = lm_head(RMSNorm(x)) for the logit rows only.
// Each residual add is fused into the RMSNorm that follows it, biases into
// the kernel after their GEMM, and the rotary embedding into the write of K
// and V into the paged cache; steps on the small-batch GEMM fold rotary + KV
// write and SiLU-and-mul into its epilogue instead, and (dense bf16 models)
// split each residual add + RMSNorm over the linears on either side of it
// (small_batch_gemm.h's SmallBatchRowNorm). Every kernel runs on stream_, in
// order.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "engine/backend/cuda/cuda_backend_impl.h"
#include "engine/backend/cuda/kernels/decode_linear.h"
#include "engine/backend/cuda/kernels/elementwise.h"
#include "engine/backend/cuda/kernels/feed_back_tokens.h"
#include "engine/backend/cuda/kernels/mma_attention.h"
#include "engine/backend/cuda/kernels/paged_attention.h"
#include "engine/backend/cuda/kernels/rotary_kv_write.h"
#include "engine/backend/cuda/kernels/small_batch_gemm.h"
#include "engine/util/status_macros.h"

namespace ernie::cuda {

namespace {

const uint16_t* Raw(const DeviceBuffer<uint16_t>& b) { return b.data(); }

}  // namespace

absl::Status CudaBackendImpl::RotaryAndAttention(int64_t layer, int32_t tokens) {
  const ModelConfig& c = config_;
  const DeviceLayerWeights& w = weights_.layers[static_cast<size_t>(layer)];
  cudaStream_t s = stream_.get();
  const PagedKvView cache = LayerCache(layer);
  ERNIE_CUDA_RETURN_IF_ERROR(LaunchRotaryKvWrite({.qkv = ws_.qkv.data(),
                                                  .bias = OrNull(w.qkv_bias),
                                                  .positions = inputs_.positions(),
                                                  .slots = inputs_.slots(),
                                                  .inv_freq = ws_.inv_freq.data(),
                                                  .cache = cache,
                                                  .tokens = tokens,
                                                  .num_heads = static_cast<int32_t>(c.num_heads),
                                                  .num_kv_heads = static_cast<int32_t>(c.num_kv_heads),
                                                  .head_dim = static_cast<int32_t>(c.head_dim)},
                                                 s),
                             "rotary + KV write kernel");
  return Attention(layer);
}

int32_t CudaBackendImpl::SplitsByItemCount(int32_t num_items) const {
  return std::min(max_attention_splits_,
                  PagedAttentionSplits(num_items, static_cast<int32_t>(config_.num_kv_heads), num_sms_));
}

bool CudaBackendImpl::WideDecodeAttention(bool single_token, int32_t num_items) const {
  return single_token && int64_t{num_items} * config_.num_kv_heads <= wide_decode_attention_max_pairs_;
}

int64_t CudaBackendImpl::ShortAttentionContext(bool single_token, int32_t num_items) const {
  int64_t context = 0;
  // Only where the item count would split: a larger step runs unsplit anyway, and a set bit there
  // would capture a second, identical graph of its shape.
  if (SplitsByItemCount(num_items) > 1 && int64_t{num_items} * config_.num_kv_heads >= unsplit_attention_min_pairs_)
    context = unsplit_attention_max_context_;
  if (WideDecodeAttention(single_token, num_items)) context = std::max<int64_t>(context, kWideDecodeAttentionKeys);
  return context;
}

bool CudaBackendImpl::StreamKv(AttentionItems items, int32_t num_items) const {
  // Decode steps only: a prefill chunk's keys are re-read by each of its
  // items' row CTAs, which an evict_first policy could send back to HBM.
  return items == AttentionItems::kSingleToken && stream_kv_min_items_ > 0 && num_items >= stream_kv_min_items_;
}

absl::Status CudaBackendImpl::Attention(int64_t layer) {
  const ModelConfig& c = config_;
  cudaStream_t s = stream_.get();
  const int64_t qkv_width = c.q_size() + 2 * c.kv_size();
  // Items of one token each (a decode step: the graph key's items == tokens)
  // take the tensor-core kernel's key-split shape; decodes beside prefill
  // chunks the mixed kernel.
  const AttentionItems items = AttentionItemsOf(inputs_.num_items(), inputs_.num_single_token_items());
  // A function of the item count and the graph key's short-context bit, so
  // a captured graph fits every context its key admits.
  const int32_t splits = step_unsplit_attention_ ? 1 : SplitsByItemCount(inputs_.num_items());
  const PagedAttentionParams attention{.q = ws_.qkv.data(),
                                       .q_row_stride = qkv_width,
                                       .cache = LayerCache(layer),
                                       .items = inputs_.items(),
                                       .block_tables = inputs_.block_tables(),
                                       .positions = inputs_.positions(),
                                       .out = Bf16(ws_.attn),
                                       .scale = attn_scale_,
                                       .num_items = inputs_.num_items(),
                                       .num_heads = static_cast<int32_t>(c.num_heads),
                                       .num_kv_heads = static_cast<int32_t>(c.num_kv_heads),
                                       .head_dim = static_cast<int32_t>(c.head_dim),
                                       .num_splits = splits,
                                       .partial_out = ws_.attn_partial_out.data(),
                                       .partial_ml = ws_.attn_partial_ml.data(),
                                       .decode_swap_ab = decode_swap_ab_,
                                       .wide_decode = step_wide_attention_,
                                       .stream_kv = StreamKv(items, inputs_.num_items())};
  ERNIE_CUDA_RETURN_IF_ERROR(mma_attention_ ? LaunchMmaAttention(attention, items, s)
                                            : LaunchPagedAttention(attention, s),
                             "paged attention kernel");
  return absl::OkStatus();
}

bool CudaBackendImpl::NormEpiloguesFor(int32_t tokens) const {
  // Every linear of the layer must take the small-batch GEMM (RunLinearWithEpilogue).
  if (config_.awq.has_value())
    return norm_epilogue_shapes_ && tokens >= awq_small_batch_min_rows_ && tokens <= awq_small_batch_max_rows_;
  return norm_epilogue_shapes_ && tokens >= 1 && tokens <= small_batch_gemm_max_rows_;
}

SmallBatchRowNorm CudaBackendImpl::SplitRowNorm() const {
  return {.sumsq = ws_.norm_sumsq.data(),
          .width = static_cast<int32_t>(config_.hidden_size),
          .eps = config_.rms_norm_eps};
}

SmallBatchNormOut CudaBackendImpl::SplitNormOut(const DeviceBuffer<float>& g) const {
  return {.weight = g.data(), .out = Bf16(ws_.h), .sumsq = ws_.norm_sumsq.data()};
}

// x += o_proj(attention(rope(q), rope(k), v)); then h = RMSNorm(x) for the MLP.
// On entry h holds this layer's input norm of x (with split norms, from
// layer 1 on, x * g with the row scales still to apply).
absl::Status CudaBackendImpl::AttentionBlock(int64_t layer, int32_t tokens) {
  const ModelConfig& c = config_;
  const DeviceLayerWeights& w = weights_.layers[static_cast<size_t>(layer)];
  const int64_t qkv_width = c.q_size() + 2 * c.kv_size();
  const bool split_norms = NormEpiloguesFor(tokens);
  ERNIE_ASSIGN_OR_RETURN(
      const bool rotary_done,
      RunLinearWithEpilogue(Raw(ws_.h), tokens, c.hidden_size, w.qkv, w.qkv_awq, qkv_width, ws_.qkv.data(),
                            GemmOutput::kF32,
                            {.kind = SmallBatchEpilogue::kRotaryKv,
                             .bias = OrNull(w.qkv_bias),
                             .rotary = {.positions = inputs_.positions(),
                                        .slots = inputs_.slots(),
                                        .inv_freq = ws_.inv_freq.data(),
                                        .cache = LayerCache(layer),
                                        .num_heads = static_cast<int32_t>(c.num_heads)},
                             // Layer 0's input norm is the RMSNorm kernel's (EnqueueLayers).
                             .row_norm = split_norms && layer > 0 ? SplitRowNorm() : SmallBatchRowNorm{}}));
  ERNIE_RETURN_IF_ERROR(rotary_done ? Attention(layer) : RotaryAndAttention(layer, tokens));
  if (split_norms) {
    return RunLinearWithEpilogue(Raw(ws_.attn), tokens, c.q_size(), w.o_proj, w.o_awq, c.hidden_size,
                                 ws_.x.data(), GemmOutput::kF32,
                                 {.kind = SmallBatchEpilogue::kAddResidualNorm,
                                  .bias = OrNull(w.o_bias),
                                  .norm_out = SplitNormOut(w.post_attn_norm)})
        .status();
  }
  ERNIE_RETURN_IF_ERROR(RunLinear(Raw(ws_.attn), tokens, c.q_size(), w.o_proj, w.o_awq, c.hidden_size, ws_.proj.data()));
  return AddProjAndNorm(OrNull(w.o_bias), w.post_attn_norm, tokens);
}

absl::Status CudaBackendImpl::AddProjAndNorm(const float* proj_bias, const DeviceBuffer<float>& norm, int32_t tokens) {
  return CudaStatus(LaunchAddRmsNorm({.x = ws_.x.data(),
                                      .delta = ws_.proj.data(),
                                      .delta_bias = proj_bias,
                                      .weight = norm.data(),
                                      .out = Bf16(ws_.h),
                                      .rows = tokens,
                                      .hidden = static_cast<int32_t>(config_.hidden_size),
                                      .eps = config_.rms_norm_eps},
                                     stream_.get()),
                    "residual add + RMSNorm kernel");
}

// proj = down(silu(gate(h)) * up(h)), or the MoE MLP of h; for every layer but the last, also
// x += proj and h = the next layer's input norm of x (with split norms, down
// adds into x itself and writes x * g). The last layer's add is left to
// EnqueueLogitPass, which needs it for the logit rows only.
absl::Status CudaBackendImpl::MlpBlock(int64_t layer, int32_t tokens) {
  const ModelConfig& c = config_;
  const DeviceLayerWeights& w = weights_.layers[static_cast<size_t>(layer)];
  cudaStream_t s = stream_.get();
  const bool split_norms = NormEpiloguesFor(tokens);
  if (w.is_moe) {
    ERNIE_RETURN_IF_ERROR(MoeBlock(layer, tokens, ws_.h.data(), /*normalize_into_h=*/false, ws_.proj.data(),
                                   /*accumulate=*/false));
  } else {
    // gate|up in bf16, as HF's bf16 model holds it: the SiLU kernel reads half the bytes.
    auto* gate_up = reinterpret_cast<__nv_bfloat16*>(ws_.gate_up.data());
    ERNIE_ASSIGN_OR_RETURN(const bool silu_done,
                           RunLinearWithEpilogue(Raw(ws_.h), tokens, c.hidden_size, w.gate_up, w.gate_up_awq,
                                                 2 * c.intermediate_size, gate_up, GemmOutput::kBf16,
                                                 {.kind = SmallBatchEpilogue::kSiluMul,
                                                  .y = Bf16(ws_.act),
                                                  .bias = OrNull(w.gate_up_bias),
                                                  .row_norm = split_norms ? SplitRowNorm() : SmallBatchRowNorm{}}));
    if (!silu_done)
      ERNIE_CUDA_RETURN_IF_ERROR(LaunchSiluAndMul(gate_up, OrNull(w.gate_up_bias), tokens,
                                                  static_cast<int32_t>(c.intermediate_size), Bf16(ws_.act), s),
                                 "SiLU-and-mul kernel");
    if (split_norms && layer + 1 < c.num_layers) {
      return RunLinearWithEpilogue(Raw(ws_.act), tokens, c.intermediate_size, w.down_proj, w.down_awq, c.hidden_size,
                                   ws_.x.data(), GemmOutput::kF32,
                                   {.kind = SmallBatchEpilogue::kAddResidualNorm,
                                    .bias = OrNull(w.down_bias),
                                    .norm_out = SplitNormOut(weights_.layers[static_cast<size_t>(layer + 1)].input_norm)})
          .status();
    }
    ERNIE_RETURN_IF_ERROR(RunLinear(Raw(ws_.act), tokens, c.intermediate_size, w.down_proj, w.down_awq,
                                    c.hidden_size, ws_.proj.data()));
  }
  if (layer + 1 == c.num_layers) return absl::OkStatus();
  return AddProjAndNorm(OrNull(w.down_bias), weights_.layers[static_cast<size_t>(layer + 1)].input_norm, tokens);
}

// Final norm (with the last layer's residual add) and lm_head for logit rows
// [first_row, first_row + rows) (at most logit_rows_per_pass_), into ws_.logits.
absl::Status CudaBackendImpl::EnqueueLogitPass(int32_t first_row, int32_t rows) {
  return NormAndLmHead(first_row, rows, ws_.proj.data(), OrNull(weights_.layers.back().down_bias));
}

// The final RMSNorm of the logit rows of x (+ delta + delta_bias when delta
// is set, x itself left as it is) into ws_.h, then lm_head on cuBLAS (or,
// up to small_batch_lm_head_max_rows rows on the small-batch GEMM).
absl::Status CudaBackendImpl::NormAndLmHead(int32_t first_row, int32_t rows, const float* delta,
                                            const float* delta_bias) {
  const ModelConfig& c = config_;
  ERNIE_CUDA_RETURN_IF_ERROR(LaunchAddRmsNorm({.x = ws_.x.data(),
                                               .delta = delta,
                                               .delta_bias = delta_bias,
                                               .weight = weights_.final_norm.data(),
                                               .row_index = inputs_.logit_rows() + first_row,
                                               .out = Bf16(ws_.h),
                                               .rows = rows,
                                               .hidden = static_cast<int32_t>(c.hidden_size),
                                               .eps = c.rms_norm_eps,
                                               .write_residual = false},
                                              stream_.get()),
                             "final RMSNorm kernel");
  if (rows <= small_batch_lm_head_max_rows_ && rows <= small_batch_gemm_max_rows_ &&
      SmallBatchGemmSupports(c.vocab_size, c.hidden_size) && reinterpret_cast<uintptr_t>(weights_.lm_head) % 16 == 0) {
    return CudaStatus(LaunchSmallBatchGemm({.x = reinterpret_cast<const __nv_bfloat16*>(ws_.h.data()),
                                            .w = reinterpret_cast<const __nv_bfloat16*>(weights_.lm_head),
                                            .y = ws_.logits.data(),
                                            .m = rows,
                                            .n = static_cast<int32_t>(c.vocab_size),
                                            .k = static_cast<int32_t>(c.hidden_size),
                                            .out = LinearOutput::kF32},
                                           stream_.get()),
                      "small-batch lm_head kernel");
  }
  return CublasLmHead(rows);
}

absl::Status CudaBackendImpl::CublasLmHead(int32_t rows) {
  const ModelConfig& c = config_;
  if (lm_head_gemm_.has_value()) {
    ERNIE_ASSIGN_OR_RETURN(const bool ran, lm_head_gemm_->Run(Raw(ws_.h), rows, weights_.lm_head, ws_.logits.data()));
    if (ran) return absl::OkStatus();
  }
  return gemm_.Run(Raw(ws_.h), rows, c.hidden_size, weights_.lm_head, c.vocab_size, ws_.logits.data(),
                   GemmOutput::kF32);
}

// At start, so that no request's step pays for it: a few ms a bucket.
absl::Status CudaBackendImpl::TuneLmHead() {
  if (!lm_head_gemm_.has_value()) return absl::OkStatus();
  // The timing's input: any finite bf16 values (0x3c3c, about 0.0115); the
  // products' time does not depend on them.
  ERNIE_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(ws_.h.data(), 0x3c, ws_.h.bytes(), stream_.get()),
                             "cudaMemsetAsync of the lm_head tuning's input");
  for (const int64_t rows : LmHeadTuningBuckets(small_batch_lm_head_max_rows_, logit_rows_per_pass_))
    ERNIE_RETURN_IF_ERROR(
        lm_head_gemm_->Tune(gemm_, Raw(ws_.h), rows, weights_.lm_head, ws_.logits.data()).status());
  return absl::OkStatus();
}

// ws_.logits (one pass, `rows` rows) to the caller's rows from first_row on.
absl::Status CudaBackendImpl::CopyLogits(int32_t first_row, int32_t rows, std::span<float> logits) {
  const auto vocab = static_cast<size_t>(config_.vocab_size);
  return CudaStatus(cudaMemcpyAsync(logits.data() + static_cast<size_t>(first_row) * vocab, ws_.logits.data(),
                                    static_cast<size_t>(rows) * vocab * sizeof(float), cudaMemcpyDeviceToHost,
                                    stream_.get()),
                    "cudaMemcpyAsync of logits");
}

// Embedding, then every layer; h holds layer 0's input norm before the loop.
absl::Status CudaBackendImpl::EnqueueLayers(int32_t tokens) {
  const ModelConfig& c = config_;
  ERNIE_CUDA_RETURN_IF_ERROR(LaunchEmbeddingGather(Bf16(weights_.embed_tokens), inputs_.token_ids(), tokens,
                                                   static_cast<int32_t>(c.hidden_size), ws_.x.data(), stream_.get()),
                             "embedding gather kernel");
  ERNIE_CUDA_RETURN_IF_ERROR(LaunchAddRmsNorm({.x = ws_.x.data(),
                                               .weight = weights_.layers[0].input_norm.data(),
                                               .out = Bf16(ws_.h),
                                               .rows = tokens,
                                               .hidden = static_cast<int32_t>(c.hidden_size),
                                               .eps = c.rms_norm_eps},
                                              stream_.get()),
                             "RMSNorm kernel");
  for (int64_t layer = 0; layer < c.num_layers; ++layer) {
    ERNIE_RETURN_IF_ERROR(AttentionBlock(layer, tokens));
    ERNIE_RETURN_IF_ERROR(MlpBlock(layer, tokens));
  }
  return absl::OkStatus();
}

// Small steps whose logits fit one lm_head pass run as one CUDA graph (the
// launches of a decode step cost more host time than their GPU time);
// others are enqueued kernel by kernel, lm_head in passes.
absl::Status CudaBackendImpl::RunStep(const StepBatch& batch, LogitPassConsumer consume_pass) {
  const ModelConfig& c = config_;
  const auto tokens = static_cast<int32_t>(batch.token_ids.size());
  const auto rows = static_cast<int32_t>(batch.logit_token_indices.size());
  ERNIE_RETURN_IF_ERROR(inputs_.Upload(batch, static_cast<int32_t>(kv_shape_.block_size),
                                       static_cast<int32_t>(c.num_heads / c.num_kv_heads), AttentionRowsPerItem(),
                                       stream_.get()));
  if (inputs_.num_fed_back() > 0) {
    // Overlapped steps: decodes whose input the last launch sampled take it
    // from the sampler's buffers, which that launch left (cuda_sample_step.cc).
    ERNIE_CUDA_RETURN_IF_ERROR(LaunchFeedBackTokens({.token_ids = inputs_.mutable_token_ids(),
                                                     .fed = inputs_.fed_back(),
                                                     .num_fed = inputs_.num_fed_back(),
                                                     .results = sampler_.device_results(),
                                                     .vocab = static_cast<int32_t>(c.vocab_size)},
                                                    stream_.get()),
                               "fed-back tokens kernel");
  }
  // Decode-sized steps take the fused GEMV kernels (bf16 or AWQ int4); rows
  // <= tokens, so their logit passes do too.
  const bool decode = tokens <= decode_max_rows_ || tokens <= cluster_decode_max_rows_;
  auto layers = [&] { return decode ? EnqueueDecodeLayers(tokens) : EnqueueLayers(tokens); };
  auto logit_pass = [&](int32_t first, int32_t n) {
    return decode ? EnqueueDecodeLogitPass(first, n) : EnqueueLogitPass(first, n);
  };
  int32_t max_position = 0;
  for (const int32_t position : batch.positions) max_position = std::max(max_position, position);
  // Both are functions of the graph key (tokens, items and the short-context bit), once a step.
  const bool single_token = tokens == inputs_.num_items();
  step_unsplit_attention_ = int64_t{max_position} + 1 <= ShortAttentionContext(single_token, inputs_.num_items());
  step_wide_attention_ = step_unsplit_attention_ && WideDecodeAttention(single_token, inputs_.num_items());
  if (TakesPersistentDecode(tokens, rows, max_position)) {  // (rows <= 1, so one lm_head pass)
    // One launch, graphed or not: the graph saves only its launch.
    ++persistent_steps_;
    auto step = [&] { return EnqueuePersistentDecode(rows); };
    if (tokens <= graph_max_tokens_) {
      const uint64_t key = GraphCache::Key(tokens, inputs_.num_items(), rows, false, /*persistent=*/true);
      ERNIE_RETURN_IF_ERROR(graphs_.Run(key, stream_.get(), step));
    } else {
      ERNIE_RETURN_IF_ERROR(step());
    }
    return rows > 0 ? consume_pass(0, rows) : absl::OkStatus();
  }
  if (tokens <= graph_max_tokens_ && rows <= logit_rows_per_pass_) {
    const uint64_t key = GraphCache::Key(tokens, inputs_.num_items(), rows, step_unsplit_attention_);
    ERNIE_RETURN_IF_ERROR(graphs_.Run(key, stream_.get(), [&] {
      ERNIE_RETURN_IF_ERROR(layers());
      return rows > 0 ? logit_pass(0, rows) : absl::OkStatus();
    }));
    return rows > 0 ? consume_pass(0, rows) : absl::OkStatus();
  }
  ++ungraphed_steps_;
  ERNIE_RETURN_IF_ERROR(layers());
  for (int32_t begin = 0; begin < rows; begin += static_cast<int32_t>(logit_rows_per_pass_)) {
    const int32_t n = std::min<int32_t>(static_cast<int32_t>(logit_rows_per_pass_), rows - begin);
    ERNIE_RETURN_IF_ERROR(logit_pass(begin, n));
    ERNIE_RETURN_IF_ERROR(consume_pass(begin, n));
  }
  return absl::OkStatus();
}

absl::Status CudaBackendImpl::Forward(const StepBatch& batch, std::span<float> logits) {
  ERNIE_RETURN_IF_ERROR(ValidateStepBatch(batch, kv_shape_, max_tokens_, config_.vocab_size, logits));
  ERNIE_CUDA_RETURN_IF_ERROR(cudaSetDevice(device_), "cudaSetDevice");  // the current device is per thread
  const absl::Status step =
      RunStep(batch, [&](int32_t first_row, int32_t rows) { return CopyLogits(first_row, rows, logits); });
  // Always wait for what was enqueued: the staging buffers are reused by the
  // next step, and a kernel fault surfaces here.
  const absl::Status done = CudaStatus(cudaStreamSynchronize(stream_.get()), "forward step");
  return step.ok() ? done : step;
}

}  // namespace ernie::cuda

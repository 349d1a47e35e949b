// The dense forward pass for decode-sized steps (at most decode_max_rows_
// tokens: CudaBackendOptions::fused_decode_max_rows; bf16 models up to
// cluster_decode_max_rows_, those above it on the cluster kernel), the same
// function as cuda_forward.cc's, in five kernels a layer (six with split-KV's
// merge):
//   qkv   = RMSNorm(x) W_qkv^T + b_qkv           decode GEMV, norm in its prologue,
//                                                rotary + KV write in its epilogue
//   paged attention                              as cuda_forward.cc
//   x    += attn W_o^T + b_o                     decode GEMV, residual add in its epilogue
//   act   = silu(g) * u, [g|u] = RMSNorm(x) W_gu^T   norm prologue, SiLU epilogue
//   x    += act W_down^T + b_down                 residual add epilogue
// and the logit pass: logits = RMSNorm(x[row]) lm_head^T for the logit rows.
// A MoE layer's MLP is cuda_moe_forward.cc's MoeBlock adding into x (its
// router kernel writes the RMSNorm of x for the experts).
// Differences from the cuBLAS path: the normalised input and the SiLU
// output stay float32 (cuBLAS reads them as bf16), so this path is, if
// anything, closer to the CPU reference. An AWQ model's linears take the
// int4 kernel with the same prologues and epilogues (awq_decode_linear.h),
// whose inputs are bf16 as on the unfused path.
#include "absl/strings/str_cat.h"
#include "engine/backend/cuda/cuda_backend_impl.h"
#include "engine/backend/cuda/kernels/awq_decode_linear.h"
#include "engine/backend/cuda/kernels/cluster_decode_linear.h"
#include "engine/backend/cuda/kernels/decode_linear.h"
#include "engine/backend/cuda/kernels/elementwise.h"
#include "engine/util/status_macros.h"

namespace ernie::cuda {

absl::Status CudaBackendImpl::DecodeLinear(DecodeLinearParams p, const DeviceAwqLinear& awq,
                                           const char* what, int64_t layer) {
  p.single_wave = decode_single_wave_;
  // Above decode_max_rows_ (8) only bf16 models come here (cluster_decode_max_rows_).
  const cudaError_t error = !awq.empty()                 ? LaunchAwqDecodeLinear(p, awq.view(), stream_.get())
                            : p.m > decode_max_rows_ ? LaunchClusterDecodeLinear(p, stream_.get())
                                                         : LaunchDecodeLinear(p, stream_.get());
  return CudaStatus(error, absl::StrCat(what, ", layer ", layer));
}

absl::Status CudaBackendImpl::EnqueueDecodeLayers(int32_t tokens) {
  const ModelConfig& c = config_;
  cudaStream_t s = stream_.get();
  const auto hidden = static_cast<int32_t>(c.hidden_size);
  ERNIE_CUDA_RETURN_IF_ERROR(LaunchEmbeddingGather(Bf16(weights_.embed_tokens), inputs_.token_ids(), tokens, hidden,
                                                   ws_.x.data(), s),
                             "embedding gather kernel");
  // ws_.gate_up holds the SiLU output here: float32 [tokens, I].
  float* act = ws_.gate_up.data();
  // (The item count is part of the step's graph key.)
  const bool prefetch_kv = inputs_.num_items() <= kv_prefetch_max_seqs_;
  for (int64_t layer = 0; layer < c.num_layers; ++layer) {
    const DeviceLayerWeights& w = weights_.layers[static_cast<size_t>(layer)];
    ERNIE_RETURN_IF_ERROR(DecodeLinear({.x_f32 = ws_.x.data(),
                            .norm_weight = w.input_norm.data(),
                            .eps = c.rms_norm_eps,
                            .w = Bf16(w.qkv),
                            .bias = OrNull(w.qkv_bias),
                            .y = ws_.qkv.data(),
                            .m = tokens,
                            .n = static_cast<int32_t>(c.q_size() + 2 * c.kv_size()),
                            .k = hidden,
                            .epilogue = DecodeEpilogue::kRotaryKv,
                            .rotary = {.positions = inputs_.positions(),
                                       .slots = inputs_.slots(),
                                       .inv_freq = ws_.inv_freq.data(),
                                       .cache = LayerCache(layer),
                                       .num_heads = static_cast<int32_t>(c.num_heads),
                                       .prefetch_items = prefetch_kv ? inputs_.items() : nullptr,
                                       .prefetch_block_tables = prefetch_kv ? inputs_.block_tables() : nullptr,
                                       .prefetch_num_items = prefetch_kv ? inputs_.num_items() : 0}},
                           w.qkv_awq, "decode qkv + rotary kernel", layer));
    ERNIE_RETURN_IF_ERROR(Attention(layer));
    DecodeLinearParams o_proj = {.x_bf16 = Bf16(ws_.attn),
                                 .w = Bf16(w.o_proj),
                                 .bias = OrNull(w.o_bias),
                                 .y = ws_.x.data(),
                                 .m = tokens,
                                 .n = hidden,
                                 .k = static_cast<int32_t>(c.q_size()),
                                 .epilogue = DecodeEpilogue::kAddResidual};
    // A folded routing's records come with the residual they are of.
    ERNIE_ASSIGN_OR_RETURN(o_proj.router_records, FoldedRouterRecords(layer, tokens, o_proj));
    ERNIE_RETURN_IF_ERROR(DecodeLinear(o_proj, w.o_awq, "decode o_proj kernel", layer));
    if (w.is_moe) {
      // The router writes h = RMSNorm(x) for the experts as it normalises x
      // itself (or, folded, each expert launch normalises x); the combine
      // adds the MoE output to x.
      ERNIE_RETURN_IF_ERROR(MoeBlock(layer, tokens, ws_.h.data(), /*normalize_into_h=*/true, ws_.x.data(),
                                     /*accumulate=*/true,
                                     o_proj.router_records.on() ? &o_proj.router_records : nullptr));
      continue;
    }
    ERNIE_RETURN_IF_ERROR(DecodeLinear({.x_f32 = ws_.x.data(),
                                                   .norm_weight = w.post_attn_norm.data(),
                                                   .eps = c.rms_norm_eps,
                                                   .w = Bf16(w.gate_up),
                                                   .bias = OrNull(w.gate_up_bias),
                                                   .y = act,
                                                   .m = tokens,
                                                   .n = static_cast<int32_t>(2 * c.intermediate_size),
                                                   .k = hidden,
                                                   .epilogue = DecodeEpilogue::kSiluMul},
                                                  w.gate_up_awq, "decode gate/up kernel", layer));
    ERNIE_RETURN_IF_ERROR(DecodeLinear({.x_f32 = act,
                                                   .w = Bf16(w.down_proj),
                                                   .bias = OrNull(w.down_bias),
                                                   .y = ws_.x.data(),
                                                   .m = tokens,
                                                   .n = hidden,
                                                   .k = static_cast<int32_t>(c.intermediate_size),
                                                   .epilogue = DecodeEpilogue::kAddResidual},
                                                  w.down_awq, "decode down_proj kernel", layer));
  }
  return absl::OkStatus();
}

// The residual stream already holds the last layer's output (the decode
// layers add it for every row), so only the final norm and lm_head remain.
absl::Status CudaBackendImpl::EnqueueDecodeLogitPass(int32_t first_row, int32_t rows) {
  const ModelConfig& c = config_;
  // Steps above 8 rows (cluster kernel): the norm, then cuBLAS, which
  // streams lm_head at ~0.8 of HBM at any row count.
  if (rows > decode_max_rows_) return NormAndLmHead(first_row, rows, /*delta=*/nullptr, /*delta_bias=*/nullptr);
  return CudaStatus(LaunchDecodeLinear({.x_f32 = ws_.x.data(),
                                        .row_index = inputs_.logit_rows() + first_row,
                                        .norm_weight = weights_.final_norm.data(),
                                        .eps = c.rms_norm_eps,
                                        .w = reinterpret_cast<const __nv_bfloat16*>(weights_.lm_head),
                                        .y = ws_.logits.data(),
                                        .m = rows,
                                        .n = static_cast<int32_t>(c.vocab_size),
                                        .k = static_cast<int32_t>(c.hidden_size)},
                                       stream_.get()),
                    "decode lm_head kernel");
}

}  // namespace ernie::cuda

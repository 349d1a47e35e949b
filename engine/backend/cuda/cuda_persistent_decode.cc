// One-token decode steps of dense bf16 models as one persistent kernel
// (kernels/persistent_decode.h): set up at start where the model's shape
// and the device allow it, and enqueued by RunStep in place of the
// per-layer kernels when a step is one token of one sequence at a context
// the kernel takes.
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "engine/backend/cuda/cuda_backend_impl.h"
#include "engine/util/status_macros.h"

namespace ernie::cuda {

PersistentDecodeParams CudaBackendImpl::PersistentDecodeShape() const {
  const ModelConfig& c = config_;
  return {.layers = ws_.persistent_layers.data(),
          .num_layers = static_cast<int32_t>(c.num_layers),
          .embed = Bf16(weights_.embed_tokens),
          .lm_head = reinterpret_cast<const __nv_bfloat16*>(weights_.lm_head),
          .final_norm = weights_.final_norm.data(),
          .inv_freq = ws_.inv_freq.data(),
          .hidden = static_cast<int32_t>(c.hidden_size),
          .num_heads = static_cast<int32_t>(c.num_heads),
          .num_kv_heads = static_cast<int32_t>(c.num_kv_heads),
          .head_dim = static_cast<int32_t>(c.head_dim),
          .intermediate = static_cast<int32_t>(c.intermediate_size),
          .vocab = static_cast<int32_t>(c.vocab_size),
          .eps = static_cast<float>(c.rms_norm_eps),
          .attn_scale = attn_scale_,
          .block_size = static_cast<int32_t>(kv_shape_.block_size),
          .num_blocks = static_cast<int32_t>(kv_shape_.num_blocks),
          .token_ids = inputs_.token_ids(),
          .positions = inputs_.positions(),
          .slots = inputs_.slots(),
          .items = inputs_.items(),
          .block_tables = inputs_.block_tables(),
          .x = ws_.x.data(),
          .q = ws_.qkv.data(),
          .act = ws_.gate_up.data(),
          .partial = ws_.persistent_partial.data(),
          .logits = ws_.logits.data(),
          .barrier = ws_.persistent_barrier.data(),
          .skip = persistent_decode_skip_};
}

absl::Status CudaBackendImpl::SetUpPersistentDecode(const CudaBackendOptions& options) {
  persistent_decode_max_context_ = 0;
  if (!options.persistent_decode || options.persistent_decode_max_context <= 0) return absl::OkStatus();
  const ModelConfig& c = config_;
  // Dense bf16 models only: an AWQ or MoE layer has kernels of its own.
  if (c.architecture != Architecture::kErnie45Dense || c.awq.has_value()) return absl::OkStatus();
  for (const DeviceLayerWeights& l : weights_.layers)
    if (l.is_moe || l.qkv.size() == 0) return absl::OkStatus();
  const char* why = nullptr;
  if (!PreparePersistentDecode(PersistentDecodeShape(), &why)) return absl::OkStatus();  // the per-layer kernels then

  std::vector<PersistentDecodeLayer> layers;
  for (int64_t i = 0; i < c.num_layers; ++i) {
    const DeviceLayerWeights& w = weights_.layers[static_cast<size_t>(i)];
    const PagedKvView cache = LayerCache(i);
    layers.push_back({.qkv = Bf16(w.qkv),
                      .o_proj = Bf16(w.o_proj),
                      .gate_up = Bf16(w.gate_up),
                      .down = Bf16(w.down_proj),
                      .qkv_bias = OrNull(w.qkv_bias),
                      .o_bias = OrNull(w.o_bias),
                      .gate_up_bias = OrNull(w.gate_up_bias),
                      .down_bias = OrNull(w.down_bias),
                      .input_norm = w.input_norm.data(),
                      .post_attn_norm = w.post_attn_norm.data(),
                      .k_cache = cache.k,
                      .v_cache = cache.v});
  }
  ERNIE_ASSIGN_OR_RETURN(ws_.persistent_layers,
                         DeviceBuffer<PersistentDecodeLayer>::Allocate(layers.size(), "persistent decode layer table"));
  ERNIE_CUDA_RETURN_IF_ERROR(cudaMemcpy(ws_.persistent_layers.data(), layers.data(),
                                        layers.size() * sizeof(PersistentDecodeLayer), cudaMemcpyHostToDevice),
                             "cudaMemcpy of the persistent decode layer table");
  ERNIE_ASSIGN_OR_RETURN(ws_.persistent_partial,
                         DeviceBuffer<float>::Allocate(static_cast<size_t>(PersistentDecodePartialFloats(
                                                           c.num_heads, c.head_dim)),
                                                       "persistent decode attention partials"));
  ERNIE_ASSIGN_OR_RETURN(ws_.persistent_barrier,
                         DeviceBuffer<unsigned long long>::Allocate(1, "persistent decode barrier"));
  ERNIE_CUDA_RETURN_IF_ERROR(cudaMemset(ws_.persistent_barrier.data(), 0, sizeof(unsigned long long)),
                             "zeroing the persistent decode barrier");
  persistent_decode_max_context_ =
      std::min<int64_t>(options.persistent_decode_max_context, kPersistentDecodeMaxContext);
  // A diagnostic for the benchmark (wrong results): phases left out to time the rest.
  if (const char* skip = std::getenv("ERNIE_PERSISTENT_DECODE_SKIP"); skip != nullptr)
    persistent_decode_skip_ = std::atoi(skip);
  return absl::OkStatus();
}

bool CudaBackendImpl::TakesPersistentDecode(int32_t tokens, int32_t rows, int64_t max_position) const {
  return persistent_decode_max_context_ > 0 && tokens == 1 && rows <= 1 &&
         max_position + 1 <= persistent_decode_max_context_;
}

absl::Status CudaBackendImpl::EnqueuePersistentDecode(int32_t rows) {
  PersistentDecodeParams p = PersistentDecodeShape();
  if (rows == 0) p.logits = nullptr;
  return CudaStatus(LaunchPersistentDecode(p, stream_.get()), "persistent decode kernel");
}

}  // namespace ernie::cuda

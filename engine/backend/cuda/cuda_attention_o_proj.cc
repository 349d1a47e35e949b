// The decode attention and o_proj in one launch (kernels/mma_attention.h
// LaunchAttentionOProj; CudaBackendOptions::attention_o_proj_rows): which
// models, steps and layers take it, and the launch that replaces
// EnqueueDecodeLayers' attention launch and o_proj launch.
#include "absl/strings/str_cat.h"
#include "engine/backend/cuda/cuda_backend_impl.h"

namespace ernie::cuda {

bool CudaBackendImpl::LayerTakesAttentionOProj(const DeviceLayerWeights& w) const {
  // An int4 o_proj has kernels of its own (and carries a folded MoE
  // routing's records); only bf16 weights are multiplied here.
  return w.o_awq.empty() && w.o_proj.size() > 0;
}

int32_t CudaBackendImpl::AttentionOProjRows(int32_t asked) const {
  // The kernel is the wide swap-AB decode attention's, on the tensor cores.
  if (asked <= 0 || !mma_attention_ || !decode_swap_ab_) return 0;
  const ModelConfig& c = config_;
  for (const DeviceLayerWeights& w : weights_.layers) {
    if (!LayerTakesAttentionOProj(w)) continue;
    // Every layer's o_proj has this shape: one asks for all.
    const PagedAttentionParams p{.num_heads = static_cast<int32_t>(c.num_heads),
                                 .num_kv_heads = static_cast<int32_t>(c.num_kv_heads),
                                 .head_dim = static_cast<int32_t>(c.head_dim)};
    const AttentionOProjParams o{.w = reinterpret_cast<const __nv_bfloat16*>(w.o_proj.data()),
                                 .n = static_cast<int32_t>(c.hidden_size),
                                 .k = static_cast<int32_t>(c.q_size()),
                                 .rows_per_cta = asked};
    return AttentionOProjSupports(p, o, nullptr) ? asked : 0;
  }
  return 0;
}

bool CudaBackendImpl::StepTakesAttentionOProj(bool single_token, int32_t num_items) const {
  // Unsplit attention: the kernel holds an item's every key.
  return attention_o_proj_rows_ > 0 && single_token && num_items <= attention_o_proj_max_items_ &&
         (step_unsplit_attention_ || SplitsByItemCount(num_items) == 1);
}

absl::Status CudaBackendImpl::AttentionOProj(int64_t layer) {
  const DeviceLayerWeights& w = weights_.layers[static_cast<size_t>(layer)];
  const AttentionOProjParams o{.w = reinterpret_cast<const __nv_bfloat16*>(w.o_proj.data()),
                               .bias = OrNull(w.o_bias),
                               .x = ws_.x.data(),
                               .n = static_cast<int32_t>(config_.hidden_size),
                               .k = static_cast<int32_t>(config_.q_size()),
                               .rows_per_cta = attention_o_proj_rows_};
  return CudaStatus(LaunchAttentionOProj(AttentionParams(layer), o, stream_.get()),
                    absl::StrCat("attention + o_proj kernel, layer ", layer));
}

}  // namespace ernie::cuda

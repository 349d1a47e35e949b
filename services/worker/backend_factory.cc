#include "services/worker/backend_factory.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/backend/cpu/cpu_backend.h"
#include "engine/backend/instant/instant_backend.h"
#include "engine/model/generation_config.h"
#include "engine/util/status_macros.h"

namespace ernie::worker {

namespace {

// The CPU backend takes no more than this by default: the point of sizing to
// need is that a small model does not grab the machine.
constexpr int64_t kDefaultCpuKvCap = int64_t{1} << 30;

std::string KvReport(int64_t blocks, int64_t block_size, int64_t bytes_per_token) {
  return absl::StrFormat("KV cache: %d blocks x %d tokens = %d tokens, %.1f MiB", blocks, block_size,
                         blocks * block_size, static_cast<double>(blocks * block_size * bytes_per_token) / (1 << 20));
}

}  // namespace

absl::StatusOr<ServingModel> BuildServingModel(const WorkerConfig& c) {
  ServingModel out;
  out.engine.scheduler = {.max_num_seqs = c.max_num_seqs,
                          .max_num_batched_tokens = c.max_num_batched_tokens,
                          .max_waiting_sequences = c.max_waiting_requests};
  out.engine.enable_prefix_caching = c.enable_prefix_caching;

  if (c.backend == "instant") {
    const int64_t max_len = c.max_model_len > 0 ? c.max_model_len : 4096;
    const int64_t blocks = std::max<int64_t>(1, (int64_t{c.max_num_seqs} * max_len + c.block_size - 1) / c.block_size);
    ERNIE_ASSIGN_OR_RETURN(auto backend, InstantBackend::Create({.vocab_size = c.instant_vocab, .block_size = c.block_size,
                                                                 .num_blocks = blocks,
                                                                 .max_tokens_per_step = c.max_num_batched_tokens}));
    out.backend = std::move(backend);
    out.engine.max_model_len = max_len;
    out.engine.eos_token_ids = {2};
    out.architecture = "instant";
    out.dtype = "none";
    out.kv_report = KvReport(blocks, c.block_size, 0);
    return out;
  }

  ERNIE_ASSIGN_OR_RETURN(out.model, LoadModel(c.model));
  const ModelConfig& mc = out.model->config;
  ERNIE_ASSIGN_OR_RETURN(GenerationDefaults defaults, LoadGenerationDefaults(c.model));
  for (int64_t id : mc.eos_token_ids) out.engine.eos_token_ids.push_back(static_cast<int32_t>(id));
  for (int64_t id : defaults.eos_token_ids)
    if (std::find(out.engine.eos_token_ids.begin(), out.engine.eos_token_ids.end(), id) == out.engine.eos_token_ids.end())
      out.engine.eos_token_ids.push_back(static_cast<int32_t>(id));
  out.architecture = mc.architecture_name;
  out.dtype = std::string(DTypeConfigName(mc.dtype));

  int64_t max_len = c.max_model_len > 0 ? c.max_model_len : std::min<int64_t>(mc.max_position_embeddings, 32768);
  if (max_len > mc.max_position_embeddings)
    return absl::InvalidArgumentError(absl::StrCat("--max-model-len ", max_len, " is beyond the model's max_position_embeddings ",
                                                   mc.max_position_embeddings));
  std::string backend = c.backend;
  if (backend == "auto") backend = "cpu";
  if (backend == "cuda") return absl::UnimplementedError("--backend cuda: the CUDA backend is not available to the worker in this build");
  {
    const int64_t per_token = mc.num_layers * mc.num_kv_heads * mc.head_dim * 2 * 4;  // float32 K and V
    int64_t bytes = c.kv_cache_bytes;
    if (bytes == 0) bytes = std::min(kDefaultCpuKvCap, int64_t{c.max_num_seqs} * max_len * per_token);
    const int64_t blocks = bytes / (per_token * c.block_size);
    if (blocks < 1)
      return absl::InvalidArgumentError(absl::StrCat("--kv-cache-bytes ", bytes, " holds no block of ", c.block_size,
                                                     " tokens (", per_token * c.block_size, " bytes)"));
    max_len = std::min(max_len, blocks * c.block_size);
    ERNIE_ASSIGN_OR_RETURN(auto b, cpu::CpuBackend::Create(*out.model, {.num_threads = c.threads, .block_size = c.block_size,
                                                                        .num_blocks = blocks,
                                                                        .max_tokens_per_step = c.max_num_batched_tokens}));
    out.backend = std::move(b);
    out.kv_report = KvReport(blocks, c.block_size, per_token);
  }
  out.engine.max_model_len = max_len;
  return out;
}

}  // namespace ernie::worker

#include "services/worker/backend_factory.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/backend/cpu/cpu_backend.h"
#if ERNIE_HAVE_CUDA_BACKEND
#include "engine/backend/cuda/cuda_backend.h"
#endif
#include "engine/backend/instant/instant_backend.h"
#include "engine/model/generation_config.h"
#include "engine/model/model_config.h"
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

#if ERNIE_HAVE_CUDA_BACKEND
// Without --kv-cache-bytes or --gpu-memory-utilization the pool is sized to
// what max_num_seqs x max_model_len needs, but at most this fraction of the
// memory left after weights and workspaces (the rest stays for cuBLAS and
// anything else on the device).
constexpr double kDefaultCudaKvCap = 0.9;

double MiB(int64_t bytes) { return static_cast<double>(bytes) / (1 << 20); }

// The CUDA backend with its KV pool sized by the worker's flags; fills
// out.backend and out.kv_report and returns the tokens the pool holds.
absl::StatusOr<int64_t> CreateCudaServing(const WorkerConfig& c, const LoadedModel& model, int64_t max_len,
                                          ServingModel& out) {
  const ModelConfig& mc = model.config;
  const int64_t per_block = mc.num_layers * mc.num_kv_heads * mc.head_dim * 2 * 2 * c.block_size;  // bf16 K and V
  // A step carries at most max_num_batched_tokens sequences (each at least
  // one new token), each of at most max_len tokens (the engine ends a
  // sequence there): the block tables it uploads hold at most that many
  // entries. The backend's own bound, for want of these flags, is the
  // model's whole context a sequence (8,192 blocks for the 0.3b): 64 MiB of
  // device memory and as much pinned host memory at 2,048 tokens a step,
  // 256 MiB at 8,192, against 1 and 4 MiB here at --max-model-len 2048.
  CudaBackendOptions options{.block_size = c.block_size,
                             .max_tokens_per_step = c.max_num_batched_tokens,
                             .max_logit_rows = std::max(1, c.max_num_seqs),
                             .max_blocks_per_step =
                                 int64_t{c.max_num_batched_tokens} * ((max_len + c.block_size - 1) / c.block_size)};
  if (c.enforce_eager) options.graph_max_tokens = 0;
  options.overlap_steps = c.async_scheduling;
  options.lm_head_gemm_tuning = c.lm_head_tuning;
  // Room for the start's warm-up (a decode graph per batch size up to
  // max_num_seqs, two for the small ones whose attention splits) and the
  // mixed steps that recur in serving.
  options.max_graphs = std::max(options.max_graphs, c.max_num_seqs + 128);
  std::string sized_by;
  if (c.kv_cache_bytes > 0) {
    options.num_blocks = c.kv_cache_bytes / per_block;
    if (options.num_blocks < 1)
      return absl::InvalidArgumentError(absl::StrCat("--kv-cache-bytes ", c.kv_cache_bytes, " holds no block of ",
                                                     c.block_size, " tokens (", per_block, " bytes in bf16)"));
    sized_by = "--kv-cache-bytes";
  } else if (c.gpu_memory_utilization > 0) {
    options.kv_free_memory_fraction = c.gpu_memory_utilization;
    sized_by = absl::StrCat("--gpu-memory-utilization ", c.gpu_memory_utilization, " of free memory");
  } else {
    options.num_blocks = (int64_t{c.max_num_seqs} * max_len + c.block_size - 1) / c.block_size;
    options.kv_free_memory_fraction = kDefaultCudaKvCap;
    sized_by = absl::StrCat("max_num_seqs x max_model_len, capped at ", kDefaultCudaKvCap, " of free memory");
  }
  auto backend = CreateCudaBackend(model, options);
  if (!backend.ok())
    return absl::Status(backend.status().code(),
                        absl::StrCat("--backend cuda: ", backend.status().message(),
                                     backend.status().code() == absl::StatusCode::kResourceExhausted
                                         ? " (lower --kv-cache-bytes, --gpu-memory-utilization, --max-num-seqs, "
                                           "--max-model-len or --max-num-batched-tokens)"
                                         : ""));
  const KvCacheShape& kv = (*backend)->kv_shape();
  const CudaMemoryBreakdown mem = (*backend)->memory();
  out.kv_report = absl::StrFormat(
      "CUDA device memory: weights %.1f MiB, KV %.1f MiB (%d blocks x %d tokens = %d tokens, sized by %s), "
      "workspace %.1f MiB",
      MiB(mem.weights), MiB(mem.kv_cache), kv.num_blocks, kv.block_size, kv.num_blocks * kv.block_size, sized_by,
      MiB(mem.workspace));
  if (model.dummy_weights) out.weight_bytes = mem.weights;  // no checkpoint to count
  out.backend = std::move(*backend);
  return kv.num_blocks * kv.block_size;
}
#endif

}  // namespace

absl::StatusOr<ServingModel> BuildServingModel(const WorkerConfig& c) {
  ServingModel out;
  out.engine.scheduler = {.max_num_seqs = c.max_num_seqs,
                          .max_num_batched_tokens = c.max_num_batched_tokens,
                          .max_waiting_sequences = c.max_waiting_requests};
  out.engine.enable_prefix_caching = c.enable_prefix_caching;
  out.engine.overlap_steps = c.async_scheduling;

  if (c.backend == "instant") {
    int64_t vocab = c.instant_vocab > 0 ? c.instant_vocab : 512;
    if (c.instant_vocab == 0 && !c.model.empty()) {
      ERNIE_ASSIGN_OR_RETURN(const ModelConfig model_config, LoadModelConfig(c.model));
      vocab = model_config.vocab_size;
    }
    const int64_t max_len = c.max_model_len > 0 ? c.max_model_len : 4096;
    const int64_t blocks = std::max<int64_t>(1, (int64_t{c.max_num_seqs} * max_len + c.block_size - 1) / c.block_size);
    ERNIE_ASSIGN_OR_RETURN(auto backend, InstantBackend::Create({.vocab_size = vocab, .block_size = c.block_size,
                                                                 .num_blocks = blocks,
                                                                 .max_tokens_per_step = c.max_num_batched_tokens,
                                                                 .step_floor = std::chrono::microseconds(c.instant_step_us),
                                                                 .token_cost = std::chrono::nanoseconds(c.instant_token_ns),
                                                                 .logit_row_cost = std::chrono::nanoseconds(c.instant_row_ns)}));
    out.backend = std::move(backend);
    out.engine.max_model_len = max_len;
    out.engine.eos_token_ids = {2};
    out.architecture = "instant";
    out.dtype = "none";
    out.kv_report = KvReport(blocks, c.block_size, 0);
    return out;
  }

  ERNIE_ASSIGN_OR_RETURN(out.model, LoadModel(c.model, c.load_format));
  out.weight_bytes = out.model->checkpoint != nullptr ? out.model->checkpoint->total_bytes() : 0;
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
#if ERNIE_HAVE_CUDA_BACKEND
  // auto: the GPU when there is one and the model is one the CUDA backend runs
  // (dense with bf16/f16/f32 or AWQ int4 linears; MoE with float experts).
  if (backend == "auto") {
    const bool cuda_runs_it = mc.architecture == Architecture::kErnie45Dense || !mc.awq.has_value();
    backend = CudaDeviceCount() > 0 && (cuda_runs_it || out.model->dummy_weights) ? "cuda" : "cpu";
  }
  if (backend == "cuda") {
    ERNIE_ASSIGN_OR_RETURN(const int64_t pool_tokens, CreateCudaServing(c, *out.model, max_len, out));
    out.engine.max_model_len = std::min(max_len, pool_tokens);
    return out;
  }
#else
  if (backend == "auto") backend = "cpu";
  if (backend == "cuda")
    return absl::UnimplementedError("--backend cuda: this worker was built without the CUDA backend (no nvcc); use --backend cpu");
#endif
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

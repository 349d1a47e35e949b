// Every setting of the worker, from a YAML file (yaml-cpp) with command-line
// flags overriding it. One table of fields serves both, so a YAML key and its
// flag always agree: YAML `kv_cache_bytes` is the flag `--kv-cache-bytes`.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace ernie::worker {

struct WorkerConfig {
  std::string model;                    // Hugging Face model directory (required)
  std::string host = "127.0.0.1";       // loopback unless asked otherwise
  int port = 50052;
  std::string backend = "auto";         // auto | cpu | cuda | instant
  std::string load_format = "auto";     // auto | safetensors | dummy (random weights on the GPU, vLLM's --load-format dummy)
  int64_t kv_cache_bytes = 0;           // 0: sized to max_num_seqs x max_model_len, capped (see README)
  double gpu_memory_utilization = 0;    // CUDA only: fraction of free memory for KV (0: unused)
  int block_size = 16;                  // tokens per KV block
  int max_num_seqs = 256;
  int max_num_batched_tokens = 2048;
  int max_model_len = 0;                // 0: min(model's max_position_embeddings, 32768)
  int max_waiting_requests = 4096;      // beyond: RESOURCE_EXHAUSTED (HTTP 429)
  bool enable_prefix_caching = true;
  // vLLM's --enforce-eager: no CUDA graphs (every step launched kernel by
  // kernel), so no graph warm-up at start either.
  bool enforce_eager = false;
  // vLLM's --async-scheduling: plan and launch step N+1 before reading step
  // N's tokens, so the host's work between steps hides behind the device's
  // (EngineConfig::overlap_steps, CudaBackendOptions::overlap_steps). On by
  // default since the device measured it (NOTES.md v30, one H100, whole
  // stack: +24% output tok/s at 64 streams, +15 - 29% at 256, TTFT p50 a
  // step or more longer); the CPU backend has nothing to overlap.
  bool async_scheduling = true;
  // CUDA: time the lm_head's cuBLAS algorithms at start, a dozen row counts,
  // and keep the fastest of each (CudaBackendOptions::lm_head_gemm_tuning;
  // ~0.1 s; on an H100 the 0.3b's 64-row step 1.4% faster). Off, the logits
  // are the same bits from start to start; on, a kept algorithm can differ.
  bool lm_head_tuning = true;
  int threads = 0;                      // CPU backend threads; 0: all cores
  int drain_timeout_s = 30;             // on SIGTERM: wait this long for running requests
  // Vocabulary of the instant (measurement) backend; 0: the model's
  // vocab_size when --model is given (so its tokenizer's ids are valid:
  // `ernie-serve MODEL --backend instant` times everything but the model),
  // else 512.
  int instant_vocab = 0;
  // The instant backend's pace: a step lasts at least instant_step_us +
  // instant_token_ns a token + instant_row_ns a logit row (all 0: no pace).
  // A GPU step emits one token a stream every ~0.5 - 2 ms, so each token is
  // its own gRPC message and SSE event; unpaced, the instant backend's steps
  // are so fast that the worker coalesces several tokens a message, and
  // neither the per-token host cost nor the scheduler's queue is what a
  // real deployment sees.
  int instant_step_us = 0;
  int instant_token_ns = 0;
  int instant_row_ns = 0;
  int64_t seed = -1;                    // vLLM's --seed: seeds of requests without one follow it; -1: random
  int metrics_port = 0;                 // Prometheus /metrics over HTTP; 0: off
  std::string metrics_host;             // empty: the same as host
  std::string served_model_name;        // the model_name label on metrics; empty: the model folder's name
  std::string tls_cert;                 // PEM certificate: serve gRPC over TLS (with tls_key)
  std::string tls_key;                  // PEM key of tls_cert
  std::string tls_ca;                   // PEM CA: require client certificates it signed (mutual TLS)
};

// Loads `path` (a YAML mapping of the keys above). Unknown keys and values of
// the wrong type are InvalidArgument errors naming the key.
absl::Status ApplyYamlFile(const std::string& path, WorkerConfig* config);
// Applies `--key value` / `--key=value` flags; `--config FILE` is applied
// first wherever it appears. Unknown flags are errors naming the flag.
absl::StatusOr<WorkerConfig> ParseWorkerFlags(const std::vector<std::string>& args);
std::string WorkerUsage();

}  // namespace ernie::worker

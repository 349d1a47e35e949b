// ernie-generate: one prompt through the engine, printed as one JSON object.
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/backend/cpu/cpu_backend.h"
#if ERNIE_HAVE_CUDA_BACKEND
#include "engine/backend/cuda/cuda_backend.h"
#endif
#include "engine/cli/generate_flags.h"
#include "engine/generate/offline_generator.h"
#include "engine/model/ernie4_5_weights.h"
#include "engine/model/generation_config.h"
#include "engine/util/npy_writer.h"
#include "nlohmann/json.hpp"

namespace {

int Fail(const absl::Status& status, int code = 1) {
  std::cerr << "ernie-generate: " << status.message() << "\n";
  return code;
}

nlohmann::json ResultJson(const ernie::OfflineGenerateResult& r, double load_ms) {
  nlohmann::json top = nlohmann::json::array();
  for (const auto& step : r.top_logprobs) {
    nlohmann::json alts = nlohmann::json::array();
    for (const auto& [id, lp] : step) alts.push_back({id, lp});
    top.push_back(alts);
  }
  const auto& t = r.timing;
  const double decode_steps = static_cast<double>(std::max<int64_t>(t.generated_tokens - 1, 0));
  return {{"token_ids", r.token_ids},
          {"logprobs", r.logprobs},
          {"top_logprobs", top},
          {"finish_reason", r.finish_reason},
          {"timing",
           {{"load_ms", load_ms},
            {"prefill_ms", t.prefill_ms},
            {"decode_ms", t.decode_ms},
            {"prompt_tokens", t.prompt_tokens},
            {"generated_tokens", t.generated_tokens},
            {"prefill_steps", t.prefill_steps},
            {"prefill_tokens_per_s", t.prefill_ms > 0 ? 1000.0 * t.prompt_tokens / t.prefill_ms : 0.0},
            {"decode_tokens_per_s", t.decode_ms > 0 ? 1000.0 * decode_steps / t.decode_ms : 0.0}}}};
}

}  // namespace

int main(int argc, char** argv) {
  auto flags = ernie::ParseGenerateFlags(std::vector<std::string>(argv + 1, argv + argc));
  if (!flags.ok()) {
    std::cerr << "ernie-generate: " << flags.status().message() << "\n" << ernie::GenerateUsage();
    return 2;
  }
  if (flags->help) {
    std::cout << ernie::GenerateUsage();
    return 0;
  }
  std::string backend_name = flags->backend;
#if ERNIE_HAVE_CUDA_BACKEND
  if (backend_name == "auto") backend_name = ernie::CudaDeviceCount() > 0 ? "cuda" : "cpu";
#else
  if (backend_name == "auto") backend_name = "cpu";
  if (backend_name == "cuda")
    return Fail(absl::UnimplementedError("--backend cuda: this build has no CUDA backend (built without nvcc); use --backend cpu"));
#endif

  const auto load_start = std::chrono::steady_clock::now();
  auto model = ernie::LoadModel(flags->model_dir);
  if (!model.ok()) return Fail(model.status());
  auto defaults = ernie::LoadGenerationDefaults(flags->model_dir);
  if (!defaults.ok()) return Fail(defaults.status());

  const int64_t needed = static_cast<int64_t>(flags->prompt_ids.size()) + flags->max_tokens;
  ernie::cpu::CpuBackendOptions options{
      .num_threads = flags->threads,
      .block_size = flags->block_size,
      .num_blocks = (needed + flags->block_size - 1) / flags->block_size,
      .max_tokens_per_step = flags->prefill_chunk > 0 ? flags->prefill_chunk
                                                      : static_cast<int64_t>(flags->prompt_ids.size())};
  absl::StatusOr<std::unique_ptr<ernie::Backend>> backend;
  if (backend_name == "cpu") {
    backend = ernie::cpu::CpuBackend::Create(**model, options);
  } else {
#if ERNIE_HAVE_CUDA_BACKEND
    backend = ernie::CreateCudaBackend(**model, {.block_size = options.block_size,
                                                 .num_blocks = options.num_blocks,
                                                 .max_tokens_per_step = options.max_tokens_per_step});
#endif
  }
  if (!backend.ok()) return Fail(backend.status());
  const double load_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - load_start).count();

  ernie::OfflineGenerateOptions gen{.max_tokens = flags->max_tokens,
                                    .temperature = flags->temperature,
                                    .seed = flags->seed,
                                    .top_logprobs = flags->top_logprobs,
                                    .prefill_chunk = flags->prefill_chunk};
  if (!flags->ignore_eos) {
    gen.stop_token_ids = defaults->eos_token_ids.empty() ? (*model)->config.eos_token_ids : defaults->eos_token_ids;
  }
  std::vector<float> dumped;
  ernie::LogitsObserver observer;
  if (!flags->dump_logits_path.empty())
    observer = [&](std::span<const float> logits) { dumped.insert(dumped.end(), logits.begin(), logits.end()); };

  auto result = ernie::GenerateOffline(**backend, flags->prompt_ids, gen, observer);
  if (!result.ok()) return Fail(result.status());
  if (!flags->dump_logits_path.empty()) {
    const int64_t vocab = (*backend)->vocab_size();
    auto s = ernie::WriteNpyFloat32(flags->dump_logits_path, dumped, {static_cast<int64_t>(dumped.size()) / vocab, vocab});
    if (!s.ok()) return Fail(s);
  }
  std::cout << ResultJson(*result, load_ms).dump() << "\n";
  return 0;
}

// ernie-bench-cpu: single-stream prefill and decode speed of the CPU backend
// on a model directory (the 0.3b shape for the figures we quote), beside the
// memory read bandwidth measured in the same run. Decode of a dense model
// reads every weight once per token, so bandwidth / weight bytes is the bound
// a decode step can reach; we report the achieved fraction of it.
//
//   ernie-bench-cpu --model DIR [--prompt-len 128] [--decode-tokens 64] [--threads N] [--log FILE]
#include <chrono>
#include <fstream>
#include <iostream>
#include <numeric>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "engine/backend/cpu/cpu_backend.h"
#include "engine/generate/offline_generator.h"
#include "nlohmann/json.hpp"
#include "tools/bench/memory_bandwidth.h"

namespace {

struct Args {
  std::string model, log;
  int prompt_len = 128, decode_tokens = 64, threads = 0;
};

bool Parse(int argc, char** argv, Args* a) {
  for (int i = 1; i < argc; ++i) {
    std::string f = argv[i];
    if (i + 1 >= argc) return false;
    std::string v = argv[++i];
    if (f == "--model") a->model = v;
    else if (f == "--log") a->log = v;
    else if (f == "--prompt-len" && absl::SimpleAtoi(v, &a->prompt_len) && a->prompt_len > 0) {}
    else if (f == "--decode-tokens" && absl::SimpleAtoi(v, &a->decode_tokens) && a->decode_tokens > 1) {}
    else if (f == "--threads" && absl::SimpleAtoi(v, &a->threads)) {}
    else return false;
  }
  return !a->model.empty();
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  if (!Parse(argc, argv, &args)) {
    std::cerr << "usage: ernie-bench-cpu --model DIR [--prompt-len N] [--decode-tokens N] [--threads N] [--log FILE]\n";
    return 2;
  }
  auto model = ernie::LoadModel(args.model);
  if (!model.ok()) {
    std::cerr << "ernie-bench-cpu: " << model.status().message() << "\n";
    return 1;
  }
  const int64_t block = 16;
  const int64_t tokens = args.prompt_len + args.decode_tokens;
  auto backend = ernie::cpu::CpuBackend::Create(
      **model, {.num_threads = args.threads, .block_size = block, .num_blocks = (tokens + block - 1) / block,
                .max_tokens_per_step = args.prompt_len});
  if (!backend.ok()) {
    std::cerr << "ernie-bench-cpu: " << backend.status().message() << "\n";
    return 1;
  }
  std::vector<int32_t> prompt(static_cast<size_t>(args.prompt_len));
  for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<int32_t>(3 + (i * 7919) % 90000 % ((*backend)->vocab_size() - 3));

  // Page the weights in before timing (a real server has them resident).
  ernie::OfflineGenerateOptions warm{.max_tokens = 2};
  if (auto w = ernie::GenerateOffline(**backend, prompt, warm); !w.ok()) {
    std::cerr << "ernie-bench-cpu: " << w.status().message() << "\n";
    return 1;
  }
  ernie::OfflineGenerateOptions gen{.max_tokens = args.decode_tokens};
  auto r = ernie::GenerateOffline(**backend, prompt, gen);
  if (!r.ok()) {
    std::cerr << "ernie-bench-cpu: " << r.status().message() << "\n";
    return 1;
  }
  ernie::ThreadPool pool(args.threads);
  const auto bw = ernie::bench::MeasureReadBandwidth(pool, int64_t{2} << 30, 5);

  const double weight_bytes = static_cast<double>((*model)->checkpoint->total_bytes());
  const double decode_tps = 1000.0 * (r->timing.generated_tokens - 1) / r->timing.decode_ms;
  const double prefill_tps = 1000.0 * r->timing.prompt_tokens / r->timing.prefill_ms;
  const double bound_tps = bw.read_gb_per_s * 1e9 / weight_bytes;
  nlohmann::json out = {{"model", args.model},
                        {"parameters", (*model)->config.ParameterCount()},
                        {"weight_bytes", weight_bytes},
                        {"threads", bw.threads},
                        {"prompt_tokens", r->timing.prompt_tokens},
                        {"decode_tokens", r->timing.generated_tokens},
                        {"prefill_tokens_per_s", prefill_tps},
                        {"decode_tokens_per_s", decode_tps},
                        {"decode_ms_per_token", 1000.0 / decode_tps},
                        {"memory_read_gb_per_s", bw.read_gb_per_s},
                        {"decode_bound_tokens_per_s", bound_tps},
                        {"decode_fraction_of_bound", decode_tps / bound_tps}};
  std::cout << out.dump(2) << "\n";
  if (!args.log.empty()) std::ofstream(args.log, std::ios::app) << out.dump() << "\n";
  return 0;
}

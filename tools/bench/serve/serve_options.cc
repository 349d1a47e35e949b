#include "tools/bench/serve/serve_options.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace ernie::bench {

std::string ServeUsage() {
  return "usage: ernie-bench serve --base-url URL --model NAME --concurrency C [--request-rate R]\n"
         "                         --num-prompts N --input-len I --output-len O [--dataset FILE]\n"
         "                         [--endpoint chat|completions] [--api-key K] [--result-json FILE]\n"
         "                         [--result-jsonl FILE] [--label TEXT] [--threads T] [--seed S]\n"
         "                         [--temperature X] [--timeout-s S] [--no-ignore-eos]\n"
         "                         [--prompt-style words|digits]\n"
         "Streams N requests (at most C at once; Poisson arrivals at R/s when given) to an OpenAI-\n"
         "compatible server and reports TTFT, TPOT, ITL, end-to-end latency and throughput as\n"
         "`vllm bench serve` does. Random prompts have exactly I tokens when the server has\n"
         "POST /tokenize; each request asks for exactly O tokens (ignore_eos, min_tokens).\n"
         "--threads: client I/O threads (default half the cores, at most 4): one thread can\n"
         "fall behind ~100k streamed tokens a second and delay the first tokens it times.\n";
}

absl::StatusOr<ServeOptions> ParseServeOptions(const std::vector<std::string>& args) {
  ServeOptions o;
  auto integer = [](const std::string& flag, const std::string& v, int lo, int* out) -> absl::Status {
    if (!absl::SimpleAtoi(v, out) || *out < lo)
      return absl::InvalidArgumentError(absl::StrCat(flag, ": '", v, "' is not an integer >= ", lo));
    return absl::OkStatus();
  };
  auto real = [](const std::string& flag, const std::string& v, double lo, double* out) -> absl::Status {
    if (v == "inf") {
      *out = std::numeric_limits<double>::infinity();
      return absl::OkStatus();
    }
    if (!absl::SimpleAtod(v, out) || !std::isfinite(*out) || *out < lo)
      return absl::InvalidArgumentError(absl::StrCat(flag, ": '", v, "' is not a number >= ", lo));
    return absl::OkStatus();
  };
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& flag = args[i];
    if (flag == "--help" || flag == "-h") return absl::NotFoundError(ServeUsage());
    if (flag == "--no-ignore-eos") {
      o.ignore_eos = false;
      continue;
    }
    if (i + 1 >= args.size()) return absl::InvalidArgumentError(absl::StrCat(flag, ": needs a value"));
    const std::string& v = args[++i];
    absl::Status s;
    if (flag == "--base-url") o.base_url = v;
    else if (flag == "--model") o.model = v;
    else if (flag == "--api-key") o.api_key = v;
    else if (flag == "--dataset") o.dataset = v;
    else if (flag == "--result-json") o.result_json = v;
    else if (flag == "--result-jsonl") o.result_jsonl = v;
    else if (flag == "--label") o.label = v;
    else if (flag == "--prompt-style") {
      if (v == "words" || v == "digits") o.digit_prompts = v == "digits";
      else s = absl::InvalidArgumentError(absl::StrCat("--prompt-style: '", v, "' is not words or digits"));
    } else if (flag == "--endpoint") {
      if (v == "chat") o.endpoint = Endpoint::kChat;
      else if (v == "completions") o.endpoint = Endpoint::kCompletions;
      else s = absl::InvalidArgumentError(absl::StrCat("--endpoint: '", v, "' is not chat or completions"));
    } else if (flag == "--concurrency") s = integer(flag, v, 1, &o.concurrency);
    else if (flag == "--num-prompts") s = integer(flag, v, 1, &o.num_prompts);
    else if (flag == "--input-len") s = integer(flag, v, 1, &o.input_len);
    else if (flag == "--output-len") s = integer(flag, v, 1, &o.output_len);
    else if (flag == "--threads") s = integer(flag, v, 1, &o.threads);
    else if (flag == "--request-rate") {
      s = real(flag, v, 0, &o.request_rate);
      if (s.ok() && o.request_rate == 0) s = absl::InvalidArgumentError("--request-rate: must be > 0 (or inf)");
    } else if (flag == "--temperature") s = real(flag, v, 0, &o.temperature);
    else if (flag == "--timeout-s") s = real(flag, v, 0.001, &o.timeout_s);
    else if (flag == "--seed") {
      if (!absl::SimpleAtoi(v, &o.seed)) s = absl::InvalidArgumentError(absl::StrCat("--seed: '", v, "' is not an unsigned integer"));
    } else {
      return absl::InvalidArgumentError(absl::StrCat("unknown option '", flag, "'\n", ServeUsage()));
    }
    if (!s.ok()) return s;
  }
  return o;  // ClientThreads caps the threads by the connections
}

int ClientThreads(int requested, int connections, int cores) {
  if (requested > 0) return std::max(1, std::min(requested, connections));
  // One thread parses ~120k SSE events a second at 256 streams on the H200 machine and is then
  // saturated, late to read the first tokens it timestamps: TTFT p50 24.4 ms with one thread,
  // 11.0 with four, same server (engine/backend/cuda/NOTES.md v27). Half the cores, at most 4,
  // leaves the rest to a server on the same machine.
  return std::max(1, std::min({4, connections, cores / 2}));
}

}  // namespace ernie::bench

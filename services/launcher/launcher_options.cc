#include "services/launcher/launcher_options.h"

#include <algorithm>
#include <cstdlib>
#include <map>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "engine/util/status_macros.h"
#include "yaml-cpp/yaml.h"



namespace ernie::launcher {

namespace {

enum Target : unsigned { kLauncher = 1, kTokenizer = 2, kWorker = 4, kGateway = 8 };

struct OptionSpec {
  unsigned targets;   // who receives it
  bool takes_value;
  const char* help;
};

// Every option ernie-serve knows, and where it goes.
const std::map<std::string, OptionSpec>& Options() {
  static const auto* options = new std::map<std::string, OptionSpec>{
      {"model", {kLauncher, true, "model directory (Hugging Face layout); also the first positional argument"}},
      {"demo", {kLauncher, false, "serve the demo checkpoint (made on first use)"}},
      {"demo-dir", {kLauncher, true, "where the demo checkpoint is kept (default ~/.cache/ernie-serve/demo-model)"}},
      {"config", {kLauncher, true, "YAML file of these options (dashes as underscores) and per-server sections"}},
      {"host", {kLauncher, true, "address the HTTP API listens on (default 127.0.0.1)"}},
      {"port", {kLauncher, true, "HTTP port (default 8000)"}},
      {"ready-timeout-s", {kLauncher, true, "seconds to wait for the servers to be ready (default 600)"}},
      {"max-restarts", {kLauncher, true, "restarts of a crashed server before giving up (default 5)"}},
      {"bin-dir", {kLauncher, true, "folder holding ernie-tokenizer, ernie-worker and ernie-gateway"}},
      {"served-model-name", {kGateway, true, "model name clients use (default: the model folder's name)"}},
      {"api-key", {kGateway, true, "accepted API key (repeatable; or env ERNIE_API_KEY)"}},
      {"cors", {kGateway, false, "allow cross-origin requests"}},
      {"web-dir", {kGateway, true, "folder of the chat page"}},
      {"max-body-bytes", {kGateway, true, "largest HTTP request body (larger: 413; default 8 MiB)"}},
      {"max-n", {kGateway, true, "largest n of a request (default 128)"}},
      {"max-tokens-limit", {kGateway, true, "largest max_tokens of a request (default 131072)"}},
      {"max-prompt-tokens", {kGateway, true, "largest prompt in tokens (default 0: the model length)"}},
      {"max-stop-strings", {kGateway, true, "most stop strings of a request (default 16)"}},
      {"max-stop-string-bytes", {kGateway, true, "longest stop string in bytes (default 256)"}},
      {"max-logit-bias", {kGateway, true, "most logit_bias entries of a request (default 1024)"}},
      {"probe-auth", {kGateway, true, "open (default) | keyed: whether /health, /ready, /version, /metrics need the API key"}},
      {"first-token-timeout-s", {kGateway, true, "504 when the worker sends no first token in this time (default 300)"}},
      {"stall-timeout-s", {kGateway, true, "504 when the worker sends no next token in this time (default 120)"}},
      {"request-timeout-s", {kGateway, true, "deadline of a whole generation (default 0: none)"}},
      {"worker-streams", {kGateway, true, "shared GenerateMany streams to each worker (default 4; 0: a Generate call per request)"}},
      {"write-timeout-s", {kGateway, true, "a client that reads nothing for this long is cut off (default 30)"}},
      {"internal-tls-dir", {kLauncher, true, "folder with ca.crt, server.crt, server.key, client.crt, client.key: mutual TLS between the servers"}},
      {"generation-config", {kLauncher, true, "auto (the model's generation_config.json) | vllm (none) | FOLDER (its generation_config.json)"}},
      {"backend", {kWorker, true, "auto | cpu | cuda | instant"}},
      {"load-format", {kWorker, true, "auto | safetensors | dummy (random weights made on the GPU from config.json: benchmarks)"}},
      {"kv-cache-bytes", {kWorker, true, "KV cache size in bytes (default: sized to need)"}},
      {"gpu-memory-utilization", {kWorker, true, "CUDA: fraction of free memory for the KV cache"}},
      {"block-size", {kWorker, true, "tokens per KV block (default 16)"}},
      {"max-num-seqs", {kWorker, true, "most sequences running at once (default 256)"}},
      {"max-num-batched-tokens", {kWorker, true, "most tokens computed per step (default 2048)"}},
      {"max-model-len", {kWorker | kGateway, true, "longest prompt + output"}},
      {"max-waiting-requests", {kWorker, true, "queued requests beyond which the API answers 429"}},
      {"enable-prefix-caching", {kWorker, false, "reuse the KV of shared prompt prefixes (default on)"}},
      {"no-enable-prefix-caching", {kWorker, false, "turn prefix caching off"}},
      {"async-scheduling", {kWorker, false, "plan step N+1 while the GPU runs step N (default on)"}},
      {"no-async-scheduling", {kWorker, false, "one step at a time: read each step's tokens before planning the next (a step less to first token)"}},
      {"enforce-eager", {kWorker, false, "no CUDA graphs: every step launched kernel by kernel, no graph warm-up at start"}},
      {"lm-head-tuning", {kWorker, false, "CUDA: time the lm_head's GEMM algorithms at start and keep the fastest (default on)"}},
      {"no-lm-head-tuning", {kWorker, false, "cuBLAS's default lm_head algorithm: the same logits' bits from start to start"}},
      {"threads", {kWorker, true, "CPU backend threads (default: all cores)"}},
      {"drain-timeout-s", {kWorker, true, "on stop: wait this long for running requests"}},
      {"max-input-bytes", {kTokenizer, true, "largest text the tokenizer accepts"}},
      // vLLM's serve options (same meaning; see "Coming from vLLM" in the README).
      {"dtype", {kLauncher, true, "auto | half | float16 | bfloat16 | float | float32 (the CPU backend computes in float32)"}},
      {"quantization", {kLauncher, true, "awq: the checkpoint must be an AutoAWQ one"}},
      {"tensor-parallel-size", {kLauncher, true, "GPUs per model; only 1 is supported"}},
      {"trust-remote-code", {kLauncher, false, "accepted for vLLM compatibility; no remote code is ever run"}},
      {"disable-log-requests", {kLauncher, false, "accepted for vLLM compatibility; requests are not logged"}},
      {"seed", {kWorker, true, "seeds of requests that bring none follow it (vLLM's --seed)"}},
      {"tokenizer-arg", {kLauncher, true, "pass one raw argument to ernie-tokenizer (repeatable)"}},
      {"worker-arg", {kLauncher, true, "pass one raw argument to ernie-worker (repeatable)"}},
      {"gateway-arg", {kLauncher, true, "pass one raw argument to ernie-gateway (repeatable)"}},
  };
  return *options;
}

size_t EditDistance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

absl::Status Apply(const std::string& name, const std::string& value, LauncherOptions* o) {
  const OptionSpec& spec = Options().at(name);
  auto int_value = [&](int* out, int lo, int hi) -> absl::Status {
    if (!absl::SimpleAtoi(value, out) || *out < lo || *out > hi)
      return absl::InvalidArgumentError(absl::StrCat("--", name, ": '", value, "' is not an integer in [", lo, ", ", hi, "]"));
    return absl::OkStatus();
  };
  if (name == "model") o->model = value;
  else if (name == "demo") o->demo = true;
  else if (name == "demo-dir") o->demo_dir = value;
  else if (name == "host") o->host = value;
  else if (name == "port") return int_value(&o->port, 1, 65535);
  else if (name == "ready-timeout-s") return int_value(&o->ready_timeout_s, 1, 86400);
  else if (name == "max-restarts") return int_value(&o->max_restarts, 0, 1000);
  else if (name == "bin-dir") o->bin_dir = value;
  else if (name == "internal-tls-dir") o->internal_tls_dir = value;
  else if (name == "tokenizer-arg") o->tokenizer_args.push_back(value);
  else if (name == "worker-arg") o->worker_args.push_back(value);
  else if (name == "gateway-arg") o->gateway_args.push_back(value);
  else if (name == "config") {}  // applied first, separately
  else if (name == "dtype") o->dtype = value;
  else if (name == "quantization") o->quantization = value;
  else if (name == "load-format") o->load_format = value;
  else if (name == "tensor-parallel-size") return int_value(&o->tensor_parallel_size, 1, 1024);
  else if (name == "generation-config") o->generation_config = value;
  const std::string flag = absl::StrCat("--", name);
  auto forward = [&](std::vector<std::string>& args) {
    args.push_back(flag);
    if (spec.takes_value) args.push_back(value);
  };
  if (spec.targets & kTokenizer) forward(o->tokenizer_args);
  if (spec.targets & kWorker) forward(o->worker_args);
  if (spec.targets & kGateway) forward(o->gateway_args);
  return absl::OkStatus();
}

absl::Status ApplyYaml(const std::string& path, LauncherOptions* o) {
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("--config ", path, ": ", e.what()));
  }
  if (root.IsNull()) return absl::OkStatus();
  if (!root.IsMap()) return absl::InvalidArgumentError(absl::StrCat(path, ": expected a mapping"));
  for (const auto& kv : root) {
    const std::string key = kv.first.as<std::string>("");
    // Per-server sections pass raw options: worker: {max_num_seqs: 8}.
    if (key == "tokenizer" || key == "worker" || key == "gateway") {
      if (!kv.second.IsMap()) return absl::InvalidArgumentError(absl::StrCat(path, ": '", key, "' must be a mapping"));
      auto& args = key == "tokenizer" ? o->tokenizer_args : key == "worker" ? o->worker_args : o->gateway_args;
      for (const auto& entry : kv.second) {
        args.push_back(absl::StrCat("--", absl::StrReplaceAll(entry.first.as<std::string>(""), {{"_", "-"}})));
        args.push_back(entry.second.as<std::string>(""));
      }
      continue;
    }
    const std::string name = absl::StrReplaceAll(key, {{"_", "-"}});
    if (!Options().contains(name) || name == "config")
      return absl::InvalidArgumentError(absl::StrCat(path, ": unknown key '", key, "' (did you mean '",
                                                     absl::StrReplaceAll(ClosestOption(name), {{"-", "_"}}), "'?)"));
    const std::string value = kv.second.IsScalar() ? kv.second.as<std::string>("") : "";
    if (!Options().at(name).takes_value && value != "true") continue;
    if (auto s = Apply(name, value, o); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace

std::string ClosestOption(const std::string& unknown) {
  std::string best;
  size_t best_d = SIZE_MAX;
  for (const auto& [name, spec] : Options()) {
    const size_t d = EditDistance(unknown, name);
    if (d < best_d) best_d = d, best = name;
  }
  return best;
}

absl::StatusOr<LauncherOptions> ParseLauncherOptions(const std::vector<std::string>& args) {
  LauncherOptions o;
  std::vector<std::pair<std::string, std::string>> parsed;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string a = args[i];
    if (a == "--help" || a == "-h") return absl::CancelledError(LauncherUsage());
    // `vllm serve MODEL` becomes `ernie-serve serve MODEL` when only "vllm" is replaced.
    if (a == "serve" && i == 0) continue;
    if (a.rfind("--", 0) != 0) {
      if (std::any_of(parsed.begin(), parsed.end(), [](const auto& p) { return p.first == "model"; }))
        return absl::InvalidArgumentError(absl::StrCat("unexpected argument '", a, "' (the model is given once)"));
      parsed.emplace_back("model", a);
      continue;
    }
    std::string name = a.substr(2), value;
    const auto eq = name.find('=');
    const bool inline_value = eq != std::string::npos;
    if (inline_value) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    }
    auto it = Options().find(name);
    if (it == Options().end())
      return absl::InvalidArgumentError(absl::StrCat("unknown option --", name, " (did you mean --", ClosestOption(name), "?)"));
    if (it->second.takes_value && !inline_value) {
      if (i + 1 >= args.size()) return absl::InvalidArgumentError(absl::StrCat("--", name, " needs a value"));
      value = args[++i];
    }
    parsed.emplace_back(name, value);
  }
  for (const auto& [name, value] : parsed)
    if (name == "config") ERNIE_RETURN_IF_ERROR(ApplyYaml(value, &o));
  for (const auto& [name, value] : parsed)
    if (name != "config") ERNIE_RETURN_IF_ERROR(Apply(name, value, &o));
  if (o.model.empty() && !o.demo) o.demo = true;  // no model: the demo, as the README promises
  if (o.demo_dir.empty()) {
    const char* home = std::getenv("HOME");
    o.demo_dir = absl::StrCat(home ? home : "/tmp", "/.cache/ernie-serve/demo-model");
  }
  return o;
}

std::string LauncherUsage() {
  std::string usage =
      "usage: ernie-serve [MODEL_DIR] [--model DIR | --demo] [--host 127.0.0.1] [--port 8000] [options]\n"
      "Starts ernie-tokenizer, ernie-worker and ernie-gateway on this machine, waits until they are\n"
      "ready, prints the URL and supervises them (a crashed server is restarted). Options:\n";
  for (const auto& [name, spec] : Options())
    absl::StrAppend(&usage, "  --", name, spec.takes_value ? " VALUE" : "", "\n      ", spec.help, "\n");
  return usage;
}

}  // namespace ernie::launcher

#include "services/worker/worker_config.h"

#include <functional>
#include <map>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "yaml-cpp/yaml.h"

namespace ernie::worker {

namespace {

using Setter = std::function<absl::Status(const std::string& value, WorkerConfig*)>;

absl::Status Bad(const std::string& key, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat(key, ": ", why));
}

Setter Int(int WorkerConfig::*field, int64_t min, int64_t max) {
  return [=](const std::string& v, WorkerConfig* c) -> absl::Status {
    int64_t x;
    if (!absl::SimpleAtoi(v, &x) || x < min || x > max)
      return absl::InvalidArgumentError(absl::StrCat("'", v, "' is not an integer in [", min, ", ", max, "]"));
    c->*field = static_cast<int>(x);
    return absl::OkStatus();
  };
}

Setter Int64(int64_t WorkerConfig::*field) {
  return [=](const std::string& v, WorkerConfig* c) -> absl::Status {
    int64_t x;
    if (!absl::SimpleAtoi(v, &x) || x < 0) return absl::InvalidArgumentError(absl::StrCat("'", v, "' is not a non-negative integer"));
    c->*field = x;
    return absl::OkStatus();
  };
}

Setter String(std::string WorkerConfig::*field) {
  return [=](const std::string& v, WorkerConfig* c) {
    c->*field = v;
    return absl::OkStatus();
  };
}

Setter Bool(bool WorkerConfig::*field) {
  return [=](const std::string& v, WorkerConfig* c) -> absl::Status {
    if (v == "true" || v == "1" || v == "yes") c->*field = true;
    else if (v == "false" || v == "0" || v == "no") c->*field = false;
    else return absl::InvalidArgumentError(absl::StrCat("'", v, "' is not true or false"));
    return absl::OkStatus();
  };
}

// key (YAML spelling) -> how to set it.
const std::map<std::string, Setter>& Fields() {
  static const auto* fields = new std::map<std::string, Setter>{
      {"model", String(&WorkerConfig::model)},
      {"host", String(&WorkerConfig::host)},
      {"port", Int(&WorkerConfig::port, 0, 65535)},
      {"backend",
       [](const std::string& v, WorkerConfig* c) -> absl::Status {
         if (v != "auto" && v != "cpu" && v != "cuda" && v != "instant")
           return absl::InvalidArgumentError(absl::StrCat("'", v, "' is not auto, cpu, cuda or instant"));
         c->backend = v;
         return absl::OkStatus();
       }},
      {"load_format",
       [](const std::string& v, WorkerConfig* c) -> absl::Status {
         if (v != "auto" && v != "safetensors" && v != "dummy")
           return absl::InvalidArgumentError(absl::StrCat("'", v, "' is not auto, safetensors or dummy"));
         c->load_format = v;
         return absl::OkStatus();
       }},
      {"kv_cache_bytes", Int64(&WorkerConfig::kv_cache_bytes)},
      {"gpu_memory_utilization",
       [](const std::string& v, WorkerConfig* c) -> absl::Status {
         double x;
         if (!absl::SimpleAtod(v, &x) || x < 0 || x > 1) return absl::InvalidArgumentError(absl::StrCat("'", v, "' is not in [0, 1]"));
         c->gpu_memory_utilization = x;
         return absl::OkStatus();
       }},
      {"block_size", Int(&WorkerConfig::block_size, 1, 1024)},
      {"max_num_seqs", Int(&WorkerConfig::max_num_seqs, 1, 65536)},
      {"max_num_batched_tokens", Int(&WorkerConfig::max_num_batched_tokens, 1, 1 << 20)},
      {"max_model_len", Int(&WorkerConfig::max_model_len, 0, 1 << 24)},
      {"max_waiting_requests", Int(&WorkerConfig::max_waiting_requests, 1, 1 << 24)},
      {"enable_prefix_caching", Bool(&WorkerConfig::enable_prefix_caching)},
      {"enforce_eager", Bool(&WorkerConfig::enforce_eager)},
      {"async_scheduling", Bool(&WorkerConfig::async_scheduling)},
      {"lm_head_tuning", Bool(&WorkerConfig::lm_head_tuning)},
      {"threads", Int(&WorkerConfig::threads, 0, 1024)},
      {"drain_timeout_s", Int(&WorkerConfig::drain_timeout_s, 0, 86400)},
      {"metrics_port", Int(&WorkerConfig::metrics_port, 0, 65535)},
      {"metrics_host", String(&WorkerConfig::metrics_host)},
      {"served_model_name", String(&WorkerConfig::served_model_name)},
      {"tls_cert", String(&WorkerConfig::tls_cert)},
      {"tls_key", String(&WorkerConfig::tls_key)},
      {"tls_ca", String(&WorkerConfig::tls_ca)},
      {"instant_vocab", Int(&WorkerConfig::instant_vocab, 4, 1 << 20)},
      {"instant_step_us", Int(&WorkerConfig::instant_step_us, 0, 1000000)},
      {"instant_token_ns", Int(&WorkerConfig::instant_token_ns, 0, 1000000)},
      {"instant_row_ns", Int(&WorkerConfig::instant_row_ns, 0, 1000000)},
      {"seed",
       [](const std::string& v, WorkerConfig* c) -> absl::Status {
         int64_t x;
         if (!absl::SimpleAtoi(v, &x) || x < -1) return absl::InvalidArgumentError(absl::StrCat("'", v, "' is not an integer >= -1"));
         c->seed = x;
         return absl::OkStatus();
       }},
  };
  return *fields;
}

absl::Status Set(const std::string& key, const std::string& value, WorkerConfig* config, const std::string& label) {
  auto it = Fields().find(key);
  if (it == Fields().end()) return Bad(label, "unknown setting (see --help)");
  absl::Status s = it->second(value, config);
  if (!s.ok()) return Bad(label, std::string(s.message()));
  return absl::OkStatus();
}

}  // namespace

absl::Status ApplyYamlFile(const std::string& path, WorkerConfig* config) {
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", e.what()));
  }
  if (root.IsNull()) return absl::OkStatus();
  if (!root.IsMap()) return absl::InvalidArgumentError(absl::StrCat(path, ": expected a mapping of settings"));
  for (const auto& kv : root) {
    const std::string key = kv.first.as<std::string>("");
    if (!kv.second.IsScalar()) return Bad(absl::StrCat(path, ": ", key), "must be a single value");
    absl::Status s = Set(key, kv.second.as<std::string>(""), config, absl::StrCat(path, ": ", key));
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::StatusOr<WorkerConfig> ParseWorkerFlags(const std::vector<std::string>& args) {
  WorkerConfig config;
  // Split into (flag, value) pairs first so --config applies before the rest.
  std::vector<std::pair<std::string, std::string>> flags;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string flag = args[i];
    if (flag == "--help" || flag == "-h") return absl::CancelledError(WorkerUsage());
    if (flag.rfind("--", 0) != 0) return Bad(flag, "expected --name value");
    std::string value;
    if (auto eq = flag.find('='); eq != std::string::npos) {
      value = flag.substr(eq + 1);
      flag = flag.substr(0, eq);
    } else if (flag == "--no-enable-prefix-caching" || flag == "--no-async-scheduling" ||
               flag == "--no-lm-head-tuning") {
      flag = "--" + flag.substr(5);  // the setting the --no- form turns off
      value = "false";
    } else if (flag == "--enable-prefix-caching" || flag == "--enforce-eager" || flag == "--async-scheduling" ||
               flag == "--lm-head-tuning") {
      value = "true";
    } else {
      if (i + 1 >= args.size()) return Bad(flag, "needs a value");
      value = args[++i];
    }
    flags.emplace_back(flag, value);
  }
  for (const auto& [flag, value] : flags)
    if (flag == "--config") {
      absl::Status s = ApplyYamlFile(value, &config);
      if (!s.ok()) return s;
    }
  for (const auto& [flag, value] : flags) {
    if (flag == "--config") continue;
    const std::string key = absl::StrReplaceAll(flag.substr(2), {{"-", "_"}});
    absl::Status s = Set(key, value, &config, flag);
    if (!s.ok()) return s;
  }
  if (config.model.empty() && config.backend != "instant") return Bad("--model", "is required");
  if (config.tls_cert.empty() != config.tls_key.empty()) return Bad("--tls-cert", "and --tls-key must be given together");
  if (!config.tls_ca.empty() && config.tls_cert.empty()) return Bad("--tls-ca", "needs --tls-cert and --tls-key");
  return config;
}

std::string WorkerUsage() {
  return "usage: ernie-worker --model DIR [--config FILE.yaml] [--host 127.0.0.1] [--port 50052]\n"
         "         [--backend auto|cpu|cuda|instant] [--load-format auto|safetensors|dummy]\n"
         "         [--kv-cache-bytes N] [--gpu-memory-utilization F]\n"
         "         [--block-size 16] [--max-num-seqs 256] [--max-num-batched-tokens 2048] [--max-model-len N]\n"
         "         [--max-waiting-requests 4096] [--enable-prefix-caching | --no-enable-prefix-caching]\n"
         "         [--enforce-eager] [--async-scheduling | --no-async-scheduling]\n"
         "         [--lm-head-tuning | --no-lm-head-tuning]\n"
         "         [--threads N] [--drain-timeout-s 30] [--seed S]\n"
         "         [--instant-vocab N] [--instant-step-us 0] [--instant-token-ns 0] [--instant-row-ns 0]\n"
         "         [--metrics-port 0] [--metrics-host HOST] [--served-model-name NAME]\n"
         "         [--tls-cert PEM --tls-key PEM [--tls-ca PEM]]  (TLS; with a CA, mutual TLS)\n"
         "Every flag is also a key of the YAML file (dashes become underscores); flags win.\n";
}

}  // namespace ernie::worker

// ernie-serve's command line: launcher options, plus options it forwards to
// the three servers it starts. One table says which server each option goes
// to, so `ernie-serve --max-num-seqs 64` reaches the worker exactly as
// `ernie-worker --max-num-seqs 64` would. The same keys (dashes as
// underscores) can sit in a YAML file given with --config.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace ernie::launcher {

struct LauncherOptions {
  std::string model;                 // model directory; empty with --demo
  bool demo = false;                 // make (once) and serve the demo checkpoint
  std::string demo_dir;              // where the demo checkpoint lives
  std::string host = "127.0.0.1";    // the gateway's address (the servers behind it stay on loopback)
  int port = 8000;
  int ready_timeout_s = 600;         // wait this long for /ready
  int max_restarts = 5;              // per child, before the launcher gives up
  std::string bin_dir;               // where ernie-tokenizer, ernie-worker, ernie-gateway live
  std::string internal_tls_dir;      // ca.crt, server.crt/.key, client.crt/.key: mutual TLS inside
  std::vector<std::string> tokenizer_args, worker_args, gateway_args;  // forwarded options
  // vLLM's serve options, checked by vllm_compat.h before anything starts.
  std::string dtype = "auto";        // auto | half | float16 | bfloat16 | float | float32
  std::string quantization;          // "" or awq
  std::string load_format;           // as given to --load-format (also forwarded to the worker); "" = auto
  int tensor_parallel_size = 1;
  std::string generation_config = "auto";  // auto | vllm | FOLDER
};

// Parses argv (without argv[0]). Unknown options are InvalidArgument naming
// the option and the closest known one. --help gives Cancelled with the usage.
absl::StatusOr<LauncherOptions> ParseLauncherOptions(const std::vector<std::string>& args);
std::string LauncherUsage();

// The known option closest to `unknown` by edit distance (for error messages).
std::string ClosestOption(const std::string& unknown);

}  // namespace ernie::launcher

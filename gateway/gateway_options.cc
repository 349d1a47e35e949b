#include "gateway/gateway_options.h"

#include <cstdlib>
#include <filesystem>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "boost/program_options.hpp"

#ifndef ERNIE_GATEWAY_WEB_DIR
#define ERNIE_GATEWAY_WEB_DIR "gateway/web"
#endif
#ifndef ERNIE_VERSION
#define ERNIE_VERSION "0.0.0"
#endif

namespace ernie::gateway {
namespace po = boost::program_options;

absl::StatusOr<GatewayOptions> ParseGatewayOptions(int argc, char** argv) {
  GatewayOptions options;
  std::string generation_config_json;
  int read_timeout_s = 60, write_timeout_s = 30;
  int poll_interval_ms = 200;
  std::string probe_auth;
  double first_token_timeout_s = 300, stall_timeout_s = 120, request_timeout_s = 0;
  uint32_t port = 8000;
  po::options_description flags("ernie-gateway: the OpenAI-compatible HTTP API of ernie-serve");
  // clang-format off
  flags.add_options()
    ("help,h", "show this help")
    ("model", po::value<std::string>(&options.app.model_dir)->required(),
     "model directory (generation_config.json defaults; its basename is the default model name)")
    ("tokenizer", po::value<std::string>(&options.tokenizer_address)->required(), "tokenizer service HOST:PORT")
    ("worker", po::value<std::vector<std::string>>(&options.workers.addresses),
     "worker service HOST:PORT (repeatable)")
    ("worker-dns", po::value<std::string>(&options.workers.dns_name),
     "HOST:PORT whose DNS name resolves to every worker (a Kubernetes headless Service), re-resolved every 5 s")
    ("host", po::value<std::string>(&options.http.host)->default_value("127.0.0.1"), "address to listen on")
    ("port", po::value<uint32_t>(&port)->default_value(8000), "port to listen on")
    ("served-model-name", po::value<std::string>(&options.app.served_model_name),
     "model name clients must use (default: basename of --model)")
    ("api-key", po::value<std::vector<std::string>>(&options.app.api_keys),
     "accepted API key (repeatable; also env ERNIE_API_KEY); none: no authentication")
    ("cors", po::bool_switch(&options.app.cors), "answer CORS preflights and allow any origin")
    ("web-dir", po::value<std::string>(&options.app.web_dir)->default_value(ERNIE_GATEWAY_WEB_DIR),
     "folder of the chat page (index.html and its assets)")
    ("generation-config", po::value<std::string>(&generation_config_json),
     "JSON object overriding generation_config.json's defaults")
    ("max-model-len", po::value<int32_t>(&options.app.fallback_max_model_len)->default_value(0),
     "model length to assume until a worker reports its own")
    ("max-n", po::value<int>(&options.app.limits.max_n)->default_value(128), "largest n accepted")
    ("max-tokens-limit", po::value<int64_t>(&options.app.limits.max_tokens)->default_value(131072),
     "largest max_tokens / max_completion_tokens accepted (larger: 400)")
    ("max-prompt-tokens", po::value<int64_t>(&options.app.limits.max_prompt_tokens)->default_value(0),
     "largest prompt in tokens (larger: 400; 0: only the model length limits it)")
    ("max-stop-strings", po::value<int>(&options.app.limits.max_stop_strings)->default_value(16),
     "most entries of `stop`")
    ("max-stop-string-bytes", po::value<size_t>(&options.app.limits.max_stop_string_bytes)->default_value(256),
     "longest stop string in bytes")
    ("max-logit-bias", po::value<int>(&options.app.limits.max_logit_bias)->default_value(1024),
     "most entries of `logit_bias`")
    ("probe-auth", po::value<std::string>(&probe_auth)->default_value("open"),
     "open: /health, /ready, /version and /metrics need no key; keyed: they need the API key too")
    ("first-token-timeout-s", po::value<double>(&first_token_timeout_s)->default_value(300),
     "a worker that sends no first token within this many seconds: 504 (0: no limit)")
    ("stall-timeout-s", po::value<double>(&stall_timeout_s)->default_value(120),
     "a worker that sends no next token within this many seconds while the gateway waits: 504 (0: no limit)")
    ("request-timeout-s", po::value<double>(&request_timeout_s)->default_value(0),
     "the gRPC deadline of a whole generation (504 after it; 0: none)")
    ("worker-streams", po::value<int>(&options.workers.multiplexed_streams)->default_value(4),
     "shared Worker.GenerateMany streams to each worker (one message a step for all their requests' tokens); "
     "0: a Worker.Generate stream per request (one message a token), for workers without GenerateMany")
    ("upstream-tls-ca", po::value<std::string>(&options.upstream_tls.ca_file),
     "PEM CA that signed the tokenizer's and workers' certificates: TLS to them")
    ("upstream-tls-cert", po::value<std::string>(&options.upstream_tls.cert_file),
     "PEM client certificate for mutual TLS (with --upstream-tls-key)")
    ("upstream-tls-key", po::value<std::string>(&options.upstream_tls.key_file), "PEM key of --upstream-tls-cert")
    ("upstream-tls-server-name", po::value<std::string>(&options.workers.tls_server_name),
     "name the tokenizer's and workers' certificates carry (default: the host of each address; workers found by "
     "--worker-dns are dialled by IP, so give the name their certificate has)")
    ("max-body-bytes", po::value<size_t>(&options.http.max_body_bytes)->default_value(8u << 20),
     "largest request body (larger: 413)")
    ("max-header-bytes", po::value<size_t>(&options.http.max_header_bytes)->default_value(64u << 10),
     "largest request header block (larger: 431)")
    ("io-threads", po::value<int>(&options.http.io_threads)->default_value(2), "HTTP I/O threads")
    ("read-timeout-s", po::value<int>(&read_timeout_s)->default_value(60),
     "seconds to read a request (and to wait idle on a keep-alive connection)")
    ("write-timeout-s", po::value<int>(&write_timeout_s)->default_value(30),
     "seconds one socket write may take before a slow reader is cut off")
    ("poll-interval-ms", po::value<int>(&poll_interval_ms)->default_value(200), "worker GetLoad poll interval")
    ("drain-timeout-s", po::value<int>(&options.drain_timeout_s)->default_value(30),
     "on SIGTERM: /ready turns 503, new generations get 503, and requests in flight get this long to finish");
  // clang-format on
  po::variables_map values;
  try {
    po::store(po::parse_command_line(argc, argv, flags), values);
    if (values.count("help")) {
      std::ostringstream usage;
      usage << flags;
      return absl::CancelledError(usage.str());
    }
    po::notify(values);
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("ernie-gateway: ", e.what(), " (see --help)"));
  }
  if (port > 65535) return absl::InvalidArgumentError(absl::StrCat("--port ", port, " is not a TCP port"));
  options.http.port = static_cast<uint16_t>(port);
  if (options.drain_timeout_s < 0) return absl::InvalidArgumentError("--drain-timeout-s must not be negative");
  if (read_timeout_s <= 0 || write_timeout_s <= 0) {
    return absl::InvalidArgumentError("--read-timeout-s and --write-timeout-s must be positive");
  }
  if (options.workers.addresses.empty() && options.workers.dns_name.empty()) {
    return absl::InvalidArgumentError("give at least one --worker HOST:PORT or --worker-dns HOST:PORT");
  }
  if (probe_auth != "open" && probe_auth != "keyed") {
    return absl::InvalidArgumentError(absl::StrCat("--probe-auth must be open or keyed, got '", probe_auth, "'"));
  }
  options.app.probes_need_key = probe_auth == "keyed";
  if (options.app.limits.max_n < 1 || options.app.limits.max_tokens < 1 || options.app.limits.max_prompt_tokens < 0 ||
      options.app.limits.max_stop_strings < 0 || options.app.limits.max_logit_bias < 0) {
    return absl::InvalidArgumentError(
        "--max-n and --max-tokens-limit must be positive; --max-prompt-tokens, --max-stop-strings and "
        "--max-logit-bias must not be negative");
  }
  if (options.workers.multiplexed_streams < 0 || options.workers.multiplexed_streams > 64) {
    return absl::InvalidArgumentError(absl::StrCat("--worker-streams ", options.workers.multiplexed_streams,
                                                   ": must be 0 (a Generate call per request) to 64"));
  }
  if (first_token_timeout_s < 0 || stall_timeout_s < 0 || request_timeout_s < 0) {
    return absl::InvalidArgumentError(
        "--first-token-timeout-s, --stall-timeout-s and --request-timeout-s must not be negative");
  }
  auto millis = [](double seconds) { return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000.0)); };
  options.app.upstream_timeouts = UpstreamTimeouts{.first_token = millis(first_token_timeout_s),
                                                   .stall = millis(stall_timeout_s),
                                                   .deadline = millis(request_timeout_s)};
  if (absl::Status tls = options.upstream_tls.Validate("--upstream-tls"); !tls.ok()) return tls;
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials =
      services::MakeChannelCredentials(options.upstream_tls);
  if (!credentials.ok()) return credentials.status();
  options.workers.credentials = *credentials;
  options.http.read_timeout = std::chrono::seconds(read_timeout_s);
  options.http.write_timeout = std::chrono::seconds(write_timeout_s);
  options.workers.poll_interval = std::chrono::milliseconds(std::max(10, poll_interval_ms));
  if (const char* key = std::getenv("ERNIE_API_KEY"); key != nullptr && *key != '\0') {
    options.app.api_keys.emplace_back(key);
  }
  if (options.app.served_model_name.empty()) {
    std::filesystem::path dir(options.app.model_dir);
    if (!dir.has_filename()) dir = dir.parent_path();  // "models/ernie/" -> "ernie"
    options.app.served_model_name = dir.filename().string();
  }
  absl::StatusOr<GenerationDefaults> defaults =
      generation_config_json.empty() ? LoadGenerationDefaults(options.app.model_dir)
                                     : ParseGenerationDefaults(generation_config_json, "--generation-config");
  if (!defaults.ok()) return defaults.status();
  options.app.defaults = *defaults;
  options.app.version = ERNIE_VERSION;
  return options;
}

}  // namespace ernie::gateway

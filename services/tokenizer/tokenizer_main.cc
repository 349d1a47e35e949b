// ernie-tokenizer --model DIR [--host 127.0.0.1] [--port 50051] [--max-input-bytes N] [--metrics-port P]
// Serves ernie.v1.Tokenizer and grpc.health.v1 until SIGINT or SIGTERM.
#include <boost/program_options.hpp>
#include <filesystem>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "services/common/metrics/metrics_http_server.h"
#include "services/common/metrics/process_metrics.h"
#include "services/common/service_log.h"
#include "services/common/shutdown_signal.h"
#include "services/tokenizer/tokenizer_server.h"

namespace {

constexpr const char* kName = "ernie-tokenizer";
namespace po = boost::program_options;

int Run(int argc, char** argv) {
  std::string model_dir;
  int metrics_port = 0;
  ernie::tokenizer::TokenizerServerOptions options;
  po::options_description flags("ernie-tokenizer options");
  flags.add_options()("help", "show this help")("model", po::value(&model_dir)->required(),
                                                "Hugging Face model directory (tokenizer.model, tokenizer_config.json)")(
      "host", po::value(&options.host)->default_value(options.host), "address to bind")(
      "port", po::value(&options.port)->default_value(options.port), "port to bind (0: any free port)")(
      "max-input-bytes", po::value(&options.service.max_input_bytes)->default_value(options.service.max_input_bytes),
      "largest accepted input (text or chat JSON bytes, 4 bytes per id)")(
      "metrics-port", po::value(&metrics_port)->default_value(0),
      "Prometheus /metrics over HTTP on --host at this port (0: off)")(
      "tls-cert", po::value(&options.tls.cert_file), "PEM certificate: serve gRPC over TLS (with --tls-key)")(
      "tls-key", po::value(&options.tls.key_file), "PEM private key of --tls-cert")(
      "tls-ca", po::value(&options.tls.ca_file), "PEM CA: require client certificates it signed (mutual TLS)");
  po::variables_map values;
  try {
    po::store(po::parse_command_line(argc, argv, flags), values);
    if (values.count("help") != 0u) {
      std::cout << flags << "\n";
      return 0;
    }
    po::notify(values);
  } catch (const po::error& error) {
    std::cerr << kName << ": " << error.what() << "\n" << flags << "\n";
    return 2;
  }
  if (options.service.max_input_bytes <= 0) {
    std::cerr << kName << ": --max-input-bytes must be positive\n";
    return 2;
  }
  if (absl::Status tls = options.tls.Validate("--tls"); !tls.ok()) {
    std::cerr << kName << ": " << tls.message() << "\n";
    return 2;
  }
  if (!options.tls.ca_file.empty() && options.tls.cert_file.empty()) {
    std::cerr << kName << ": --tls-ca needs --tls-cert and --tls-key\n";
    return 2;
  }
  if (metrics_port < 0 || metrics_port > 65535) {
    std::cerr << kName << ": --metrics-port must be in [0, 65535]\n";
    return 2;
  }
  // Before any thread starts, so every thread inherits the blocked mask.
  ernie::services::BlockShutdownSignals();
  ernie::metrics::Registry registry;
  std::unique_ptr<ernie::tokenizer::TokenizerMetrics> metrics;
  std::unique_ptr<ernie::metrics::MetricsHttpServer> metrics_server;
  if (metrics_port > 0) {
    std::filesystem::path model_path = std::filesystem::path(model_dir).lexically_normal();
    if (!model_path.has_filename()) model_path = model_path.parent_path();
    absl::Status registered = registry.AddConstantLabel("model_name", model_path.filename().string());
    if (registered.ok()) registered = ernie::metrics::RegisterProcessMetrics(registry);
    if (registered.ok()) {
      auto created = ernie::tokenizer::TokenizerMetrics::Create(registry);
      if (created.ok()) metrics = std::move(*created);
      registered = created.status();
    }
    if (registered.ok()) {
      auto started = ernie::metrics::MetricsHttpServer::Start(options.host, metrics_port, &registry);
      if (started.ok()) metrics_server = std::move(*started);
      registered = started.status();
    }
    if (!registered.ok()) {
      ernie::services::LogLine(kName, std::string(registered.message()));
      return 1;
    }
    options.service.metrics = metrics.get();
    ernie::services::LogLine(kName, absl::StrCat("metrics on http://", options.host, ":", metrics_server->port(),
                                                 "/metrics"));
  }
  auto tokenizer = ernie::tokenizer::Tokenizer::Load(model_dir);
  if (!tokenizer.ok()) {
    ernie::services::LogLine(kName, absl::StrCat("cannot load ", model_dir, ": ", tokenizer.status().ToString()));
    return 1;
  }
  auto server = ernie::tokenizer::TokenizerServer::Start(std::shared_ptr<const ernie::tokenizer::Tokenizer>(
                                                             std::move(tokenizer).value()),
                                                         options);
  if (!server.ok()) {
    ernie::services::LogLine(kName, server.status().ToString());
    return 1;
  }
  ernie::services::LogLine(kName, absl::StrCat("serving on ", (*server)->address()));
  const int signal_number = ernie::services::WaitForShutdownSignal();
  ernie::services::LogLine(kName, absl::StrCat("signal ", signal_number, ", shutting down"));
  (*server)->Shutdown();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return Run(argc, argv);
  } catch (const std::exception& error) {
    std::cerr << kName << ": " << error.what() << "\n";
    return 1;
  }
}

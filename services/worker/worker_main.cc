// ernie-worker: serves one model over the Worker gRPC API.
#include <pthread.h>
#include <signal.h>

#include <chrono>
#include <iostream>
#include <memory>
#include <thread>

#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "services/common/metrics/gpu_metrics.h"
#include "services/common/metrics/metrics_http_server.h"
#include "services/common/metrics/process_metrics.h"
#include "engine/sample/philox.h"
#include "services/common/grpc_tls.h"
#include "services/worker/backend_factory.h"
#include "services/worker/worker_config.h"
#include "services/worker/worker_metrics.h"
#include "services/worker/worker_service.h"

namespace {

// With a deadline: a gateway keeps its GenerateMany streams open until it
// closes them, so a plain Shutdown() would wait for them for ever.
void StopServer(grpc::Server& server) {
  server.Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
}

void Log(const std::string& line) { std::cerr << "ernie-worker: " << line << std::endl; }

std::string ModelNameLabel(const ernie::worker::WorkerConfig& config) {
  if (!config.served_model_name.empty()) return config.served_model_name;
  if (config.model.empty()) return "instant";
  std::filesystem::path path = std::filesystem::path(config.model).lexically_normal();
  if (!path.has_filename()) path = path.parent_path();  // "dir/" names "dir", as the gateway's default does
  return path.filename().string();
}

std::string KvDtypeName(int64_t bytes_per_element, const std::string& model_dtype) {
  if (bytes_per_element == 4) return "float32";
  if (bytes_per_element == 2) return model_dtype;  // the KV cache keeps the weights' 16-bit type
  return absl::StrCat(bytes_per_element * 8, "-bit");
}

}  // namespace

int main(int argc, char** argv) {
  auto config = ernie::worker::ParseWorkerFlags(std::vector<std::string>(argv + 1, argv + argc));
  if (!config.ok()) {
    if (config.status().code() == absl::StatusCode::kCancelled) {  // --help
      std::cout << config.status().message();
      return 0;
    }
    std::cerr << "ernie-worker: " << config.status().message() << "\n" << ernie::worker::WorkerUsage();
    return 2;
  }
  // Signals are taken by sigwait below, never by a random thread.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  auto credentials = ernie::services::MakeServerCredentials(
      {.cert_file = config->tls_cert, .key_file = config->tls_key, .ca_file = config->tls_ca});
  if (!credentials.ok()) {
    std::cerr << "ernie-worker: " << credentials.status().message() << "\n";
    return 2;
  }
  // Serve health (NOT_SERVING) while the model loads.
  grpc::EnableDefaultHealthCheckService(true);
  ernie::worker::WorkerService service;
  grpc::ServerBuilder builder;
  int port = 0;
  const std::string address = absl::StrCat(config->host, ":", config->port);
  builder.AddListeningPort(address, *credentials, &port);
  builder.RegisterService(&service);
  builder.SetMaxReceiveMessageSize(64 << 20);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    Log(absl::StrCat("cannot listen on ", address));
    return 1;
  }
  auto* health = server->GetHealthCheckService();
  health->SetServingStatus(false);

  // Metrics are served from the start, so a scrape sees the process while the model loads.
  ernie::metrics::Registry registry;
  std::unique_ptr<ernie::worker::WorkerMetrics> metrics;
  std::unique_ptr<ernie::metrics::MetricsHttpServer> metrics_server;
  if (config->metrics_port > 0) {
    absl::Status registered = registry.AddConstantLabel("model_name", ModelNameLabel(*config));
    if (registered.ok()) registered = ernie::metrics::RegisterProcessMetrics(registry);
    if (registered.ok()) {
      auto created = ernie::worker::WorkerMetrics::Create(registry, config->max_model_len > 0 ? config->max_model_len : 32768,
                                                          config->max_num_seqs);
      if (created.ok()) metrics = std::move(*created);
      registered = created.status();
    }
    auto started = registered.ok() ? ernie::metrics::MetricsHttpServer::Start(
                                         config->metrics_host.empty() ? config->host : config->metrics_host,
                                         config->metrics_port, &registry)
                                   : absl::StatusOr<std::unique_ptr<ernie::metrics::MetricsHttpServer>>(registered);
    if (!started.ok()) {
      Log(std::string(started.status().message()));
      StopServer(*server);
      return 1;
    }
    metrics_server = std::move(*started);
    Log(absl::StrCat("metrics on http://", config->metrics_host.empty() ? config->host : config->metrics_host, ":",
                     metrics_server->port(), "/metrics"));
  }

  const auto load_start = std::chrono::steady_clock::now();
  // vLLM's --seed: the seeds drawn for requests that bring none follow it.
  if (config->seed >= 0) ernie::SetRequestSeedBase(static_cast<uint64_t>(config->seed));
  auto serving = ernie::worker::BuildServingModel(*config);
  if (!serving.ok()) {
    Log(std::string(serving.status().message()));
    StopServer(*server);
    return 1;
  }
  const double load_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - load_start).count();
  // Before serving: a running server would otherwise pay each one-time cost
  // (a CUDA graph capture) in the middle of everyone's stream.
  const auto warmup_start = std::chrono::steady_clock::now();
  auto warmed = serving->backend->WarmUp(serving->engine.scheduler.max_num_seqs);
  if (!warmed.ok()) {
    Log(absl::StrCat("warm-up failed: ", warmed.status().message()));
    StopServer(*server);
    return 1;
  }
  if (*warmed > 0)
    Log(absl::StrCat("captured ", *warmed, " decode-step CUDA graphs (batch sizes up to ",
                     serving->engine.scheduler.max_num_seqs, ") in ",
                     std::chrono::duration<double>(std::chrono::steady_clock::now() - warmup_start).count(),
                     " s (--enforce-eager: none)"));
  auto core = ernie::EngineCore::Create(serving->backend.get(), serving->engine);
  if (!core.ok()) {
    Log(std::string(core.status().message()));
    StopServer(*server);
    return 1;
  }
  Log((*core)->overlaps_steps() ? "async scheduling: step N+1 is planned and launched while the device runs step N"
                                 : absl::StrCat("one step at a time (",
                                                config->async_scheduling
                                                    ? absl::StrCat("the ", std::string(serving->backend->name()),
                                                                   " backend has no device running behind the host")
                                                    : std::string("--async-scheduling overlaps them"),
                                                ")"));
  const auto& kv = serving->backend->kv_shape();
  ernie::worker::ServedModelInfo info{.architecture = serving->architecture,
                                      .dtype = serving->dtype,
                                      .backend = std::string(serving->backend->name()),
                                      .model_path = config->model,
                                      .max_model_len = static_cast<int32_t>(serving->engine.max_model_len),
                                      .vocab_size = static_cast<int32_t>(serving->backend->vocab_size()),
                                      .block_size = static_cast<int32_t>(kv.block_size),
                                      .num_kv_blocks = static_cast<int32_t>(kv.num_blocks),
                                      .eos_token_ids = serving->engine.eos_token_ids};
  if (metrics != nullptr) (*core)->SetObserver(metrics.get());
  auto engine = std::make_unique<ernie::EngineLoop>(std::move(*core));
  if (metrics != nullptr) {
    const ernie::worker::WorkerMetricsInfo metrics_info{
        .backend = info.backend,
        .dtype = info.dtype,
        .kv_dtype = KvDtypeName(kv.bytes_per_element, info.dtype),
        .block_size = kv.block_size,
        .num_blocks = kv.num_blocks,
        .max_model_len = serving->engine.max_model_len,
        .max_num_seqs = serving->engine.scheduler.max_num_seqs,
        .max_num_batched_tokens = engine->core().config().scheduler.max_num_batched_tokens,
        .enable_prefix_caching = serving->engine.enable_prefix_caching,
        .weight_bytes = serving->weight_bytes,
        .kv_cache_bytes = kv.total_bytes()};
    absl::Status attached = metrics->AttachEngine(engine.get(), metrics_info, &service.draining_flag());
    if (attached.ok() && info.backend == "cuda") {
      auto gpus = ernie::metrics::RegisterGpuMetrics(registry);
      attached = gpus.status();
      if (gpus.ok()) Log(absl::StrCat("GPU metrics from NVML: ", *gpus, " device(s)"));
    }
    if (!attached.ok()) Log(absl::StrCat("metrics: ", attached.message()));
  }
  service.Attach(engine.get(), info);
  health->SetServingStatus(true);
  Log(absl::StrCat("model ", config->model.empty() ? "(instant)" : config->model, " loaded in ", load_s, " s on backend ",
                   info.backend, "; ", serving->kv_report, "; max_model_len ", info.max_model_len));
  Log(absl::StrCat("serving on ", config->host, ":", port));

  int sig = 0;
  sigwait(&signals, &sig);
  // Drain: NOT_SERVING so routers move away, refuse new requests, let running ones finish.
  Log(absl::StrCat("signal ", sig, ": draining (up to ", config->drain_timeout_s, " s)"));
  health->SetServingStatus(false);
  service.StartDraining();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(config->drain_timeout_s);
  while (std::chrono::steady_clock::now() < deadline) {
    const auto load = engine->Load();
    if (load.running + load.waiting == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  metrics_server.reset();  // its callbacks read the engine: stop scrapes first
  engine.reset();  // aborts anything left
  Log("stopped");
  return 0;
}

// ernie-worker: serves one model over the Worker gRPC API.
#include <pthread.h>
#include <signal.h>

#include <chrono>
#include <iostream>
#include <memory>
#include <thread>

#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>

#include "absl/strings/str_cat.h"
#include "services/worker/backend_factory.h"
#include "services/worker/worker_config.h"
#include "services/worker/worker_service.h"

namespace {

void Log(const std::string& line) { std::cerr << "ernie-worker: " << line << std::endl; }

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

  // Serve health (NOT_SERVING) while the model loads.
  grpc::EnableDefaultHealthCheckService(true);
  ernie::worker::WorkerService service;
  grpc::ServerBuilder builder;
  int port = 0;
  const std::string address = absl::StrCat(config->host, ":", config->port);
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  builder.SetMaxReceiveMessageSize(64 << 20);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    Log(absl::StrCat("cannot listen on ", address));
    return 1;
  }
  auto* health = server->GetHealthCheckService();
  health->SetServingStatus(false);

  const auto load_start = std::chrono::steady_clock::now();
  auto serving = ernie::worker::BuildServingModel(*config);
  if (!serving.ok()) {
    Log(std::string(serving.status().message()));
    server->Shutdown();
    return 1;
  }
  const double load_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - load_start).count();
  auto core = ernie::EngineCore::Create(serving->backend.get(), serving->engine);
  if (!core.ok()) {
    Log(std::string(core.status().message()));
    server->Shutdown();
    return 1;
  }
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
  auto engine = std::make_unique<ernie::EngineLoop>(std::move(*core));
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
  engine.reset();  // aborts anything left
  Log("stopped");
  return 0;
}

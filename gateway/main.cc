// ernie-gateway: the OpenAI-compatible HTTP front of ernie-serve. Wires the
// tokenizer client, the worker pool and the HTTP server, then waits for
// SIGINT/SIGTERM and stops in order (listener, upstream calls, threads).
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "gateway/gateway_options.h"
#include "gateway/http/http_server.h"
#include "gateway/routes/gateway_app.h"
#include "gateway/upstream/tokenizer_client.h"
#include "gateway/upstream/worker_pool.h"

int main(int argc, char** argv) {
  using namespace ernie::gateway;
  absl::StatusOr<GatewayOptions> options = ParseGatewayOptions(argc, argv);
  if (!options.ok()) {
    const bool help = options.status().code() == absl::StatusCode::kCancelled;
    std::fprintf(help ? stdout : stderr, "%s\n", std::string(options.status().message()).c_str());
    return help ? 0 : 2;
  }

  // Signals are taken by sigwait below; every thread started after this
  // inherits the mask.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  TokenizerClient tokenizer(options->tokenizer_address, options->workers.credentials, options->workers.tls_server_name);
  tokenizer.Start();
  WorkerPool workers(options->workers);
  workers.Start();
  GatewayApp app(options->app, &tokenizer, &workers);
  absl::StatusOr<std::unique_ptr<HttpServer>> server = HttpServer::Start(
      options->http, [&app](HttpRequest request, std::shared_ptr<ResponseChannel> channel) {
        app.Handle(std::move(request), std::move(channel));
      });
  if (!server.ok()) {
    std::fprintf(stderr, "ernie-gateway: %s\n", std::string(server.status().message()).c_str());
    return 1;
  }
  std::printf("ernie-gateway: listening on http://%s:%u\n", options->http.host.c_str(),
              static_cast<unsigned>((*server)->port()));
  std::fflush(stdout);

  int received = 0;
  sigwait(&signals, &received);
  // Drain: readiness turns false (Kubernetes stops routing here), new
  // generations get 503, requests in flight finish until the timeout. A
  // second signal stops at once.
  std::fprintf(stderr, "ernie-gateway: signal %d, draining (up to %d s)\n", received, options->drain_timeout_s);
  app.StartDraining();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(options->drain_timeout_s);
  const timespec poll{.tv_sec = 0, .tv_nsec = 50'000'000};
  while (app.metrics().requests_in_flight() > 0 && std::chrono::steady_clock::now() < deadline) {
    if (sigtimedwait(&signals, nullptr, &poll) > 0) break;
  }
  std::fprintf(stderr, "ernie-gateway: stopping (%lld requests still in flight)\n",
               static_cast<long long>(app.metrics().requests_in_flight()));
  (*server)->Stop();
  workers.Stop();
  tokenizer.Stop();
  // Streams still open hold gRPC calls whose callbacks may run during
  // static destruction; the connections are closed already, so leave now.
  std::fflush(stdout);
  std::fflush(stderr);
  std::_Exit(0);
}

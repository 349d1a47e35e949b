// ernie-serve: the one command. Starts the tokenizer, the worker and the
// gateway as child processes on loopback ports (the gateway on --port),
// waits for readiness, prints the URL, restarts a server that dies, and
// stops them all cleanly on SIGINT / SIGTERM.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <iostream>
#include <memory>
#include <thread>

#include "absl/strings/str_cat.h"
#include "services/launcher/child_process.h"
#include "services/launcher/http_probe.h"
#include "services/launcher/launcher_options.h"
#include "services/launcher/startup_checks.h"
#include "services/launcher/vllm_compat.h"

namespace {

namespace fs = std::filesystem;
using ernie::launcher::ChildProcess;
namespace exit_code = ernie::launcher;

void Log(const std::string& line) { std::cerr << "ernie-serve: " << line << std::endl; }

std::string SelfDir() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string(".") : exe.parent_path().string();
}

// Runs a command to completion (the demo maker), returning its exit code.
int RunToCompletion(const std::string& binary, std::vector<std::string> args) {
  ChildProcess child("ernie-make-model", binary, std::move(args));
  if (!child.Start().ok()) return 127;
  int status = 0;
  while (!child.Exited(&status)) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  return status;
}

bool WaitForSignal(const sigset_t& signals, int timeout_ms, int* sig) {
  timespec ts{timeout_ms / 1000, (timeout_ms % 1000) * 1000000L};
  const int s = sigtimedwait(&signals, nullptr, &ts);
  if (s > 0) *sig = s;
  return s > 0;
}

void StopAll(std::vector<std::unique_ptr<ChildProcess>>& children) {
  // Front door first, so no request arrives at a server that is going away.
  for (auto it = children.rbegin(); it != children.rend(); ++it) (*it)->Stop(/*grace_ms=*/35000);
}

}  // namespace

int main(int argc, char** argv) {
  auto options = ernie::launcher::ParseLauncherOptions(std::vector<std::string>(argv + 1, argv + argc));
  if (!options.ok()) {
    if (options.status().code() == absl::StatusCode::kCancelled) {
      std::cout << options.status().message();
      return 0;
    }
    Log(std::string(options.status().message()));
    return 2;
  }
  // A shell starts background jobs with SIGINT ignored; an ignored signal is
  // discarded even while blocked, so take the default back before sigwait.
  signal(SIGINT, SIG_DFL);
  signal(SIGTERM, SIG_DFL);
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  sigprocmask(SIG_BLOCK, &signals, nullptr);

  const std::string bin = options->bin_dir.empty() ? SelfDir() : options->bin_dir;
  for (const char* name : {"ernie-tokenizer", "ernie-worker", "ernie-gateway"})
    if (access((fs::path(bin) / name).c_str(), X_OK) != 0) {
      Log(absl::StrCat("cannot find ", name, " in ", bin, " (use --bin-dir)"));
      return 1;
    }
  std::string model = options->model;
  if (options->demo) {
    model = options->demo_dir;
    if (!fs::exists(fs::path(model) / "config.json")) {
      Log(absl::StrCat("making the demo checkpoint in ", model));
      std::error_code ec;
      const bool existed = fs::exists(model, ec);
      const int status =
          RunToCompletion((fs::path(bin) / "ernie-make-model").string(), {model, "--shape", "demo", "--seed", "1"});
      if (status != 0) {
        // A half-written checkpoint must not pass for a whole one next time.
        if (!existed) fs::remove_all(model, ec);
        Log(absl::StrCat("could not write the demo checkpoint in ", model, " (ernie-make-model exited with status ",
                         status, "; its message above names the file: a full disk, a file size limit or a "
                         "read-only folder)"));
        return exit_code::kExitCannotWrite;
      }
    }
  }
  auto resolved = ernie::launcher::ResolveModelDir(model);
  if (!resolved.ok()) {
    Log(std::string(resolved.status().message()));
    return ernie::launcher::ExitCodeFor(resolved.status());
  }
  model = *resolved;
  // Fail here, naming the file, rather than as a server that dies while starting.
  if (absl::Status readable = ernie::launcher::CheckModelReadable(model, options->load_format != "dummy");
      !readable.ok()) {
    Log(absl::StrCat("model ", model, " cannot be served: ", readable.message()));
    return ernie::launcher::ExitCodeFor(readable);
  }
  auto notes = ernie::launcher::ApplyVllmOptions(model, &*options);
  if (!notes.ok()) {
    Log(std::string(notes.status().message()));
    return 2;
  }
  for (const auto& note : *notes) Log(note);
  // Another server on --port would answer our readiness probe: refuse at once.
  if (ernie::launcher::HttpGetStatus(options->host, options->port, "/health", 500) != 0) {
    Log(absl::StrCat("port ", options->port, " on ", options->host, " is already in use"));
    return 1;
  }
  // The two gRPC servers and their Prometheus /metrics (the gateway serves its own on --port).
  const std::vector<int> ports = ernie::launcher::PickFreePorts(4);
  if (ports.size() != 4) {
    Log("no free loopback port for the internal servers");
    return 1;
  }
  const int tokenizer_port = ports[0], worker_port = ports[1], tokenizer_metrics_port = ports[2],
            worker_metrics_port = ports[3];
  auto with = [](std::vector<std::string> base, const std::vector<std::string>& extra) {
    base.insert(base.end(), extra.begin(), extra.end());
    return base;
  };
  // The worker labels its metrics with the name clients use, as the gateway does.
  std::vector<std::string> worker_args = options->worker_args;
  for (size_t i = 0; i + 1 < options->gateway_args.size(); ++i)
    if (options->gateway_args[i] == "--served-model-name")
      worker_args.insert(worker_args.end(), {"--served-model-name", options->gateway_args[i + 1]});
  // --internal-tls-dir: mutual TLS on the gateway -> tokenizer / worker links.
  std::vector<std::string> server_tls, client_tls;
  if (!options->internal_tls_dir.empty()) {
    const fs::path dir(options->internal_tls_dir);
    for (const char* name : {"ca.crt", "server.crt", "server.key", "client.crt", "client.key"}) {
      if (absl::Status file = ernie::launcher::CheckReadableFile((dir / name).string()); !file.ok()) {
        Log(absl::StrCat("--internal-tls-dir: ", file.message()));
        return exit_code::kExitUsage;
      }
    }
    server_tls = {"--tls-cert", (dir / "server.crt").string(), "--tls-key", (dir / "server.key").string(),
                  "--tls-ca", (dir / "ca.crt").string()};
    client_tls = {"--upstream-tls-ca", (dir / "ca.crt").string(), "--upstream-tls-cert",
                  (dir / "client.crt").string(), "--upstream-tls-key", (dir / "client.key").string()};
  }
  std::vector<std::unique_ptr<ChildProcess>> children;
  children.push_back(std::make_unique<ChildProcess>(
      "tokenizer", (fs::path(bin) / "ernie-tokenizer").string(),
      with({"--model", model, "--host", "127.0.0.1", "--port", std::to_string(tokenizer_port), "--metrics-port",
            std::to_string(tokenizer_metrics_port)},
           with(server_tls, options->tokenizer_args))));
  children.push_back(std::make_unique<ChildProcess>(
      "worker", (fs::path(bin) / "ernie-worker").string(),
      with({"--model", model, "--host", "127.0.0.1", "--port", std::to_string(worker_port), "--metrics-port",
            std::to_string(worker_metrics_port)},
           with(server_tls, worker_args))));
  children.push_back(std::make_unique<ChildProcess>(
      "gateway", (fs::path(bin) / "ernie-gateway").string(),
      with({"--model", model, "--tokenizer", absl::StrCat("127.0.0.1:", tokenizer_port), "--worker",
            absl::StrCat("127.0.0.1:", worker_port), "--host", options->host, "--port", std::to_string(options->port)},
           with(client_tls, options->gateway_args))));
  for (auto& c : children) {
    if (auto s = c->Start(); !s.ok()) {
      Log(std::string(s.message()));
      StopAll(children);
      return 1;
    }
  }

  // Wait for readiness; a server that exits now is a configuration error.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(options->ready_timeout_s);
  bool ready = false;
  int sig = 0;
  while (!ready && std::chrono::steady_clock::now() < deadline) {
    if (WaitForSignal(signals, 200, &sig)) {
      Log("interrupted while starting");
      StopAll(children);
      return 130;
    }
    for (auto& c : children) {
      int status;
      if (c->Exited(&status)) {
        Log(absl::StrCat(c->name(), " exited with status ", status, " while starting: ", c->CommandLine()));
        StopAll(children);
        return exit_code::kExitServerFailed;
      }
    }
    ready = ernie::launcher::HttpGetStatus(options->host, options->port, "/ready", 1000) == 200;
  }
  if (!ready) {
    Log(absl::StrCat("not ready after ", options->ready_timeout_s, " s"));
    StopAll(children);
    return 1;
  }
  const std::string url = absl::StrCat("http://", options->host, ":", options->port);
  Log(absl::StrCat("serving ", model));
  // The line vLLM users grep for, in the words uvicorn prints it.
  Log(absl::StrCat("Running on ", url, " (Press CTRL+C to quit)"));
  Log("Application startup complete.");
  Log(absl::StrCat("chat page: ", url, "/   OpenAI API: ", url, "/v1"));
  Log(absl::StrCat("metrics: ", url, "/metrics (gateway), http://127.0.0.1:", tokenizer_metrics_port,
                   "/metrics (tokenizer), http://127.0.0.1:", worker_metrics_port, "/metrics (worker)"));

  std::vector<int> restarts(children.size(), 0);
  while (!WaitForSignal(signals, 200, &sig)) {
    for (size_t i = 0; i < children.size(); ++i) {
      int status;
      if (!children[i]->Exited(&status)) continue;
      if (++restarts[i] > options->max_restarts) {
        Log(absl::StrCat(children[i]->name(), " died ", restarts[i], " times; stopping"));
        StopAll(children);
        return 1;
      }
      Log(absl::StrCat(children[i]->name(), " exited with status ", status, "; restarting (", restarts[i], "/",
                       options->max_restarts, ")"));
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
      if (auto s = children[i]->Start(); !s.ok()) Log(std::string(s.message()));
    }
  }
  Log(absl::StrCat("signal ", sig, ": stopping"));
  StopAll(children);
  Log("stopped");
  return 0;
}

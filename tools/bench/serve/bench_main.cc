// ernie-bench: serving benchmarks.
//   ernie-bench serve ...        OpenAI-compatible HTTP server (ernie-serve, llama-server, vLLM)
//   ernie-bench worker-ttft ...  Worker.Generate directly over gRPC (the gateway's baseline)
//   ernie-bench worker-load --address HOST:PORT   one Worker.GetLoad as JSON
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "tools/bench/serve/latency_summary.h"
#include "tools/bench/serve/serve_bench.h"
#include "tools/bench/serve/serve_options.h"
#include "tools/bench/serve/worker_probe.h"

namespace {

constexpr const char* kUsage =
    "usage: ernie-bench serve --base-url URL --model NAME --concurrency C ...   (ernie-bench serve --help)\n"
    "       ernie-bench worker-ttft --address HOST:PORT ...                      (ernie-bench worker-ttft --help)\n"
    "       ernie-bench worker-load --address HOST:PORT [--timeout-s S]\n";

// --help arrives as NotFound carrying the usage text: print it and succeed.
int Fail(const absl::Status& s) {
  if (absl::IsNotFound(s) && absl::StrContains(s.message(), "usage:")) {
    std::cout << s.message();
    return 0;
  }
  std::cerr << "ernie-bench: " << s.message() << "\n";
  return 2;
}

bool WriteResults(const nlohmann::json& result, const std::string& json_path, const std::string& jsonl_path) {
  if (!json_path.empty()) {
    std::ofstream out(json_path);
    out << result.dump(2) << "\n";
    if (!out) return std::cerr << "ernie-bench: cannot write " << json_path << "\n", false;
  }
  if (!jsonl_path.empty()) {
    std::ofstream out(jsonl_path, std::ios::app);
    out << result.dump() << "\n";
    if (!out) return std::cerr << "ernie-bench: cannot append to " << jsonl_path << "\n", false;
  }
  return true;
}

int Serve(const std::vector<std::string>& args) {
  auto options = ernie::bench::ParseServeOptions(args);
  if (!options.ok()) return Fail(options.status());
  auto result = ernie::bench::RunServeBenchmark(*options);
  if (!result.ok()) return Fail(result.status());
  std::cout << ernie::bench::FormatServeTable(*result);
  for (const auto& e : (*result)["errors"]) std::cerr << "ernie-bench: failed request: " << e.get<std::string>() << "\n";
  if (!WriteResults(*result, options->result_json, options->result_jsonl)) return 2;
  return (*result)["failed"].get<int64_t>() == 0 ? 0 : 1;
}

int WorkerTtft(const std::vector<std::string>& args) {
  auto options = ernie::bench::ParseWorkerTtftOptions(args);
  if (!options.ok()) return Fail(options.status());
  auto result = ernie::bench::RunWorkerTtft(*options);
  if (!result.ok()) return Fail(result.status());
  std::cout << ernie::bench::FormatServeTable(*result);
  for (const auto& e : (*result)["errors"]) std::cerr << "ernie-bench: failed request: " << e.get<std::string>() << "\n";
  if (!WriteResults(*result, options->result_json, options->result_jsonl)) return 2;
  return (*result)["failed"].get<int64_t>() == 0 ? 0 : 1;
}

int WorkerLoad(const std::vector<std::string>& args) {
  std::string address;
  double timeout_s = 5;
  for (size_t i = 0; i + 1 < args.size(); i += 2) {
    if (args[i] == "--address") address = args[i + 1];
    else if (args[i] == "--timeout-s") {
      if (!absl::SimpleAtod(args[i + 1], &timeout_s) || timeout_s <= 0)
        return Fail(absl::InvalidArgumentError(absl::StrCat("--timeout-s: '", args[i + 1], "' is not a number > 0")));
    }
    else return Fail(absl::InvalidArgumentError(absl::StrCat("worker-load: unknown option '", args[i], "'")));
  }
  if (args.size() % 2 != 0 || address.empty())
    return Fail(absl::InvalidArgumentError("worker-load: needs --address HOST:PORT"));
  auto load = ernie::bench::QueryWorkerLoad(address, timeout_s);
  if (!load.ok()) return Fail(load.status());
  std::cout << load->dump() << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << kUsage;
    return 2;
  }
  const std::string command = argv[1];
  const std::vector<std::string> args(argv + 2, argv + argc);
  if (command == "serve") return Serve(args);
  if (command == "worker-ttft") return WorkerTtft(args);
  if (command == "worker-load") return WorkerLoad(args);
  if (command == "--help" || command == "-h" || command == "help") {
    std::cout << kUsage;
    return 0;
  }
  std::cerr << "ernie-bench: unknown command '" << command << "'\n" << kUsage;
  return 2;
}

#include "tools/bench/serve/serve_bench.h"

#include <cmath>
#include <ctime>
#include <iostream>
#include <random>
#include <thread>

#include <boost/asio/ip/tcp.hpp>

#include "absl/strings/str_cat.h"
#include "engine/util/status_macros.h"
#include "tools/bench/serve/bench_prompts.h"
#include "tools/bench/serve/blocking_http_client.h"
#include "tools/bench/serve/latency_summary.h"
#include "tools/bench/serve/stream_connection.h"

namespace ernie::bench {

namespace {

absl::StatusOr<std::string> FirstModel(BlockingHttpClient* client) {
  ERNIE_ASSIGN_OR_RETURN(HttpReply reply, client->Get("/v1/models"));
  if (reply.status != 200)
    return absl::FailedPreconditionError(absl::StrCat("GET /v1/models answered ", reply.status, ": ", reply.body.substr(0, 300)));
  try {
    const auto json = nlohmann::json::parse(reply.body);
    if (json.contains("data") && json["data"].is_array() && !json["data"].empty() && json["data"][0].contains("id"))
      return json["data"][0]["id"].get<std::string>();
  } catch (const nlohmann::json::exception& e) {
    return absl::FailedPreconditionError(absl::StrCat("GET /v1/models: unreadable answer: ", e.what()));
  }
  return absl::FailedPreconditionError("GET /v1/models lists no model; pass --model");
}

std::string RequestBody(const ServeOptions& o, const std::string& model, const BenchPrompt& prompt) {
  nlohmann::json body = {{"model", model},
                         {"max_tokens", prompt.output_len},
                         {"temperature", o.temperature},
                         {"stream", true},
                         {"stream_options", {{"include_usage", true}}}};
  if (o.endpoint == Endpoint::kChat) {
    body["messages"] = nlohmann::json::array({{{"role", "user"}, {"content", prompt.text}}});
    body["max_completion_tokens"] = prompt.output_len;
  } else {
    body["prompt"] = prompt.text;
  }
  if (o.ignore_eos) {
    // vLLM's and llama.cpp's extension fields: every request makes exactly output_len tokens.
    body["ignore_eos"] = true;
    body["min_tokens"] = prompt.output_len;
  }
  return body.dump();
}

// Poisson arrivals at `rate` per second (all at 0 when rate is infinite).
std::vector<double> ArrivalTimes(int n, double rate, uint64_t seed) {
  std::vector<double> times(static_cast<size_t>(n), 0.0);
  if (std::isinf(rate)) return times;
  std::mt19937_64 rng(seed ^ 0x9e3779b97f4a7c15ull);
  std::exponential_distribution<double> gap(rate);
  double t = 0;
  for (auto& at : times) {
    at = t;
    t += gap(rng);
  }
  return times;
}

std::string Target(const ServeOptions& o, const BaseUrl& url) {
  return url.path_prefix + (o.endpoint == Endpoint::kChat ? "/v1/chat/completions" : "/v1/completions");
}

// One streamed request before the run, so a wrong model, key or route fails
// with the server's message instead of N identical failures.
absl::Status CheckOneRequest(BlockingHttpClient* client, const std::string& path, const std::string& body) {
  ERNIE_ASSIGN_OR_RETURN(HttpReply reply, client->Post(path, body));
  if (reply.status != 200)
    return absl::FailedPreconditionError(absl::StrCat("the test request to ", path, " answered ", reply.status, ": ",
                                                      reply.body.substr(0, 500)));
  bool text = false;
  std::string error;
  SseScanner scanner;
  scanner.Feed(reply.body, [&](const SseEvent& e) {
    text |= e.kind == SseEvent::Kind::kContent;
    if (e.kind == SseEvent::Kind::kError) error = e.error_message;
  });
  if (!error.empty()) return absl::FailedPreconditionError(absl::StrCat("the test request failed: ", error));
  if (!text) return absl::FailedPreconditionError(absl::StrCat("the test request streamed no text: ", reply.body.substr(0, 500)));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<nlohmann::json> RunServeBenchmark(const ServeOptions& o) {
  ERNIE_ASSIGN_OR_RETURN(BaseUrl url, ParseBaseUrl(o.base_url));
  BlockingHttpClient setup(url, o.api_key);
  std::string model = o.model;
  if (model.empty()) {
    ERNIE_ASSIGN_OR_RETURN(model, FirstModel(&setup));
  }

  std::cerr << "ernie-bench: preparing " << o.num_prompts << " prompts\n";
  ERNIE_ASSIGN_OR_RETURN(PromptSet prompts,
                         o.dataset.empty()
                             ? MakeRandomPrompts(&setup, model, o.digit_prompts ? PromptStyle::kDigits : PromptStyle::kWords, o.num_prompts, o.input_len, o.output_len, o.seed)
                             : LoadDatasetPrompts(&setup, model, o.dataset, o.num_prompts, o.output_len));
  for (const auto& w : prompts.warnings) std::cerr << "ernie-bench: warning: " << w << "\n";

  RequestPlan plan;
  plan.url = url;
  plan.target = Target(o, url);
  plan.api_key = o.api_key;
  plan.timeout_s = o.timeout_s;
  for (const auto& p : prompts.prompts) plan.bodies.push_back(RequestBody(o, model, p));
  plan.arrival_s = ArrivalTimes(o.num_prompts, o.request_rate, o.seed);
  ERNIE_RETURN_IF_ERROR(CheckOneRequest(&setup, plan.target, plan.bodies.front()));

  boost::system::error_code ec;
  boost::asio::io_context resolve_io;
  const auto endpoints = boost::asio::ip::tcp::resolver(resolve_io).resolve(url.host, url.port, ec);
  if (ec) return absl::UnavailableError(absl::StrCat("resolve ", url.HostHeader(), ": ", ec.message()));

  std::vector<RequestResult> results(plan.bodies.size());
  plan.results = &results;
  const int connections = std::min(o.concurrency, o.num_prompts);
  const int threads = ClientThreads(o.threads, connections, static_cast<int>(std::thread::hardware_concurrency()));
  std::vector<std::unique_ptr<boost::asio::io_context>> ios;
  for (int t = 0; t < threads; ++t) ios.push_back(std::make_unique<boost::asio::io_context>(1));
  std::cerr << "ernie-bench: " << o.num_prompts << " requests to " << o.base_url << plan.target << " (model " << model
            << "), " << connections << " at once, " << threads << " client thread(s)\n";
  plan.start = BenchClock::now();
  for (int c = 0; c < connections; ++c)
    std::make_shared<StreamConnection>(*ios[static_cast<size_t>(c % threads)], &plan, endpoints)->Start();
  std::vector<std::thread> workers;
  for (auto& io : ios) workers.emplace_back([&io] { io->run(); });
  for (auto& w : workers) w.join();
  const double duration = std::chrono::duration<double>(BenchClock::now() - plan.start).count();

  nlohmann::json out = SummarizeRequests(results, duration);
  // When the server reports no usage, count input tokens from the prompts.
  if (out["total_input_tokens"].get<int64_t>() == 0) {
    int64_t input = 0;
    for (size_t i = 0; i < results.size(); ++i)
      if (results[i].success) input += prompts.prompts[i].prompt_tokens;
    out["total_input_tokens"] = input;
    out["total_token_throughput"] = static_cast<double>(input + out["total_output_tokens"].get<int64_t>()) / duration;
  }
  out["backend"] = "openai-chat";
  if (o.endpoint == Endpoint::kCompletions) out["backend"] = "openai-completions";
  out["label"] = o.label;
  out["base_url"] = o.base_url;
  out["endpoint"] = plan.target;
  out["model_id"] = model;
  out["num_prompts"] = o.num_prompts;
  out["max_concurrency"] = connections;
  out["request_rate"] = std::isinf(o.request_rate) ? nlohmann::json("inf") : nlohmann::json(o.request_rate);
  out["input_len"] = o.input_len;
  out["output_len"] = o.output_len;
  out["client_threads"] = threads;
  out["prompt_style"] = o.digit_prompts ? "digits" : "words";
  out["exact_prompt_lengths"] = prompts.exact;
  out["warnings"] = prompts.warnings;
  out["date"] = static_cast<int64_t>(std::time(nullptr));
  return out;
}

}  // namespace ernie::bench

// The gateway over real HTTP and real gRPC on loopback: fake tokenizer and
// worker services in-process, the real HttpServer + GatewayApp, and a raw
// socket client. Chat and completions, streamed and not, stop strings,
// client disconnect, keep-alive, retries and every error status; each test
// runs twice, the worker reached over shared GenerateMany streams (the
// default) and over a Generate call per request.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <utility>
#include <vector>

#include "gateway/http/http_server.h"
#include "gateway/routes/gateway_app.h"
#include "tests/gateway/fake_services.h"
#include "tests/gateway/http_test_client.h"

namespace ernie::gateway {
namespace {

using testing::ClientResponse;
using testing::FakeServer;
using testing::FakeTokenizer;
using testing::FakeWorker;
using testing::HttpTestClient;
using OJson = nlohmann::ordered_json;

// Never destroyed (see ~Harness); reachable, so not a leak to LeakSanitizer.
void KeepUntilExit(std::unique_ptr<HttpServer> server, std::unique_ptr<GatewayApp> app) {
  static auto* const kept = new std::vector<std::pair<std::unique_ptr<HttpServer>, std::unique_ptr<GatewayApp>>>();
  kept->emplace_back(std::move(server), std::move(app));
}

// The worker streams of the test being run (its parameter: 0 is a Generate
// call per request), read by every Harness it makes.
int g_multiplexed_streams = 4;

struct HarnessOptions {
  int workers = 1;
  int multiplexed_streams = g_multiplexed_streams;
  std::vector<std::string> api_keys;
  bool cors = false;
  bool dead_worker_only = false;  // point the pool at a port nobody listens on
};

class Harness {
 public:
  explicit Harness(const HarnessOptions& options = {}) : tokenizer_server_(&tokenizer_) {
    for (int i = 0; i < options.workers; ++i) {
      workers_.push_back(std::make_unique<FakeWorker>());
      worker_servers_.push_back(std::make_unique<FakeServer>(workers_.back().get()));
    }
    WorkerPoolOptions pool_options;
    pool_options.multiplexed_streams = options.multiplexed_streams;
    if (options.dead_worker_only) {
      pool_options.addresses.push_back("127.0.0.1:1");
    } else {
      for (const auto& server : worker_servers_) pool_options.addresses.push_back(server->address());
    }
    // Generous: under ThreadSanitizer on a busy machine a poll can take over
    // 300 ms, and a worker whose poll timed out counts as down.
    pool_options.poll_timeout = std::chrono::milliseconds(2000);
    pool_ = std::make_unique<WorkerPool>(pool_options);
    pool_->PollNowForTest();
    client_ = std::make_unique<TokenizerClient>(tokenizer_server_.address());
    client_->Start();
    EXPECT_TRUE(client_->WaitReady(std::chrono::seconds(5)));

    web_dir_ = std::filesystem::temp_directory_path() / absl::StrCat("ernie_gateway_web_", getpid());
    std::filesystem::create_directories(web_dir_);
    std::ofstream(web_dir_ / "index.html") << "<html>chat</html>";
    std::ofstream(web_dir_ / "app.js") << "let x = 1;";

    GatewayConfig config{.served_model_name = "test-model",
                         .model_dir = "/models/test-model",
                         .api_keys = options.api_keys,
                         .cors = options.cors,
                         .web_dir = web_dir_.string(),
                         .limits = {.max_n = 4},
                         .version = "9.9.9"};
    config.defaults.temperature = 0.8;
    config.defaults.top_p = 0.8;
    app_ = std::make_unique<GatewayApp>(config, client_.get(), pool_.get());
    HttpServerOptions http{.host = "127.0.0.1", .port = 0, .io_threads = 2, .max_body_bytes = 4096,
                           .write_timeout = std::chrono::milliseconds(2000)};
    auto server = HttpServer::Start(http, [this](HttpRequest request, std::shared_ptr<ResponseChannel> channel) {
      app_->Handle(std::move(request), std::move(channel));
    });
    EXPECT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
  }
  ~Harness() {
    server_->Stop();
    // A generation's last worker callback, which releases its lease, can
    // come after the client has its answer: wait for it before destroying
    // the pool (ThreadSanitizer caught a Release into a destroyed pool).
    EXPECT_TRUE(pool_->WaitForLeasesReleased(std::chrono::seconds(10)));
    pool_->Stop();
    client_->Stop();
    std::filesystem::remove_all(web_dir_);
    // That last callback can also drop the request's channel, so its HTTP
    // session (on the server's io_context) and the app's metrics must
    // outlive it (ThreadSanitizer caught a session's strand released while
    // the io_context was being destroyed). As in ernie-gateway, which
    // _Exit()s without destroying them, they are kept to the end.
    KeepUntilExit(std::move(server_), std::move(app_));
  }

  uint16_t port() const { return server_->port(); }
  FakeWorker& worker(int i = 0) { return *workers_[static_cast<size_t>(i)]; }
  FakeTokenizer& tokenizer() { return tokenizer_; }
  GatewayApp& app() { return *app_; }

  ClientResponse Post(const std::string& path, const OJson& body, const std::string& headers = "") {
    HttpTestClient client(port());
    return client.Fetch("POST", path, body.dump(), headers);
  }
  ClientResponse Get(const std::string& path, const std::string& headers = "") {
    HttpTestClient client(port());
    return client.Fetch("GET", path, "", headers);
  }

 private:
  FakeTokenizer tokenizer_;
  FakeServer tokenizer_server_;
  std::vector<std::unique_ptr<FakeWorker>> workers_;
  std::vector<std::unique_ptr<FakeServer>> worker_servers_;
  std::unique_ptr<WorkerPool> pool_;
  std::unique_ptr<TokenizerClient> client_;
  std::filesystem::path web_dir_;
  std::unique_ptr<GatewayApp> app_;
  std::unique_ptr<HttpServer> server_;
};

OJson ChatBody(OJson extra = OJson::object()) {
  OJson body = {{"model", "test-model"}, {"messages", OJson::array({{{"role", "user"}, {"content", "hi"}}})}};
  for (auto& [key, value] : extra.items()) body[key] = value;
  return body;
}

// The JSON payloads of an SSE body, "[DONE]" kept as a string.
std::vector<OJson> SseEvents(const std::string& body, bool* saw_done) {
  std::vector<OJson> events;
  *saw_done = false;
  size_t start = 0;
  while (start < body.size()) {
    const size_t end = body.find("\n\n", start);
    if (end == std::string::npos) break;
    const std::string event = body.substr(start, end - start);
    start = end + 2;
    EXPECT_EQ(event.rfind("data: ", 0), 0u) << event;
    const std::string payload = event.substr(6);
    if (payload == "[DONE]") {
      *saw_done = true;
      EXPECT_EQ(start, body.size()) << "[DONE] must be last";
      continue;
    }
    events.push_back(OJson::parse(payload));
  }
  return events;
}

OJson ParseBody(const ClientResponse& response) { return OJson::parse(response.body, nullptr, false); }

class GatewayServerTest : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override { g_multiplexed_streams = GetParam(); }
  void TearDown() override { g_multiplexed_streams = 4; }
  bool multiplexed() const { return GetParam() > 0; }
};

INSTANTIATE_TEST_SUITE_P(WorkerStreams, GatewayServerTest, ::testing::Values(4, 0),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return info.param > 0 ? std::string("Multiplexed") : std::string("PerRequest");
                         });

TEST_P(GatewayServerTest, ChatNonStreaming) {
  Harness h;
  const ClientResponse response = h.Post("/v1/chat/completions", ChatBody(), "X-Request-Id: req-42\r\n");
  ASSERT_EQ(response.status, 200) << response.body;
  EXPECT_EQ(response.headers.at("x-request-id"), "req-42");
  const OJson body = ParseBody(response);
  EXPECT_EQ(body["object"], "chat.completion");
  EXPECT_EQ(body["id"].get<std::string>().rfind("chatcmpl-", 0), 0u);
  EXPECT_EQ(body["model"], "test-model");
  EXPECT_EQ(body["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(body["choices"][0]["message"]["content"], "Hello world!");
  EXPECT_EQ(body["choices"][0]["finish_reason"], "stop");
  EXPECT_TRUE(body["choices"][0]["logprobs"].is_null());
  EXPECT_EQ(body["usage"]["prompt_tokens"], 2);
  EXPECT_EQ(body["usage"]["completion_tokens"], 3);
  EXPECT_EQ(body["usage"]["total_tokens"], 5);
  EXPECT_EQ(body["usage"]["prompt_tokens_details"]["cached_tokens"], 1);
  // What went upstream: the request id (per request: the client's, as metadata; on a shared stream: the
  // response's id, unique among the worker's requests), defaults then request fields, the budget the model leaves.
  if (multiplexed()) {
    EXPECT_EQ(h.worker().last_request_id.rfind(body["id"].get<std::string>() + "-", 0), 0u) << h.worker().last_request_id;
  } else {
    EXPECT_EQ(h.worker().last_request_id, "req-42");
  }
  EXPECT_EQ(h.tokenizer().last_request_id, "req-42");
  EXPECT_EQ(h.tokenizer().last_messages_json, R"([{"role":"user","content":"hi"}])");
  const auto& sampling = h.worker().last_request.sampling();
  EXPECT_FLOAT_EQ(sampling.temperature(), 0.8f);
  EXPECT_FLOAT_EQ(sampling.top_p(), 0.8f);
  EXPECT_EQ(sampling.max_tokens(), 62);
  EXPECT_EQ(h.worker().last_request.prompt_token_ids_size(), 2);
}

TEST_P(GatewayServerTest, ChatSamplingFieldsReachTheWorker) {
  Harness h;
  const ClientResponse response =
      h.Post("/v1/chat/completions", ChatBody({{"temperature", 0.1}, {"max_tokens", 5}, {"seed", 7}, {"n", 2},
                                               {"top_k", 3}, {"stop_token_ids", {2}}, {"logprobs", true},
                                               {"top_logprobs", 2}}));
  ASSERT_EQ(response.status, 200) << response.body;
  const auto& sampling = h.worker().last_request.sampling();
  EXPECT_FLOAT_EQ(sampling.temperature(), 0.1f);
  EXPECT_EQ(sampling.max_tokens(), 5);
  EXPECT_EQ(sampling.seed(), 7u);
  EXPECT_EQ(sampling.n(), 2);
  EXPECT_EQ(sampling.top_k(), 3);
  EXPECT_EQ(sampling.stop_token_ids_size(), 1);
  EXPECT_TRUE(sampling.logprobs());
  EXPECT_EQ(sampling.top_logprobs(), 2);
  const OJson body = ParseBody(response);
  ASSERT_EQ(body["choices"].size(), 2u);
  EXPECT_EQ(body["choices"][1]["index"], 1);
  EXPECT_EQ(body["choices"][1]["message"]["content"], "Hello world!");
  const OJson& logprobs = body["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(logprobs.size(), 3u);
  EXPECT_EQ(logprobs[0]["token"], " Hello");
  EXPECT_FLOAT_EQ(logprobs[0]["logprob"].get<float>(), -0.5f);
  EXPECT_EQ(logprobs[2]["bytes"], OJson::array({33}));
  EXPECT_EQ(logprobs[0]["top_logprobs"].size(), 2u);
  EXPECT_EQ(body["usage"]["completion_tokens"], 6);
}

TEST_P(GatewayServerTest, ChatStreamingIsOpenAiSse) {
  Harness h;
  const ClientResponse response =
      h.Post("/v1/chat/completions", ChatBody({{"stream", true}, {"stream_options", {{"include_usage", true}}}}));
  ASSERT_EQ(response.status, 200) << response.body;
  EXPECT_EQ(response.headers.at("content-type"), "text/event-stream");
  EXPECT_EQ(response.headers.at("transfer-encoding"), "chunked");
  bool done = false;
  const std::vector<OJson> events = SseEvents(response.body, &done);
  EXPECT_TRUE(done);
  ASSERT_GE(events.size(), 4u);
  EXPECT_EQ(events[0]["object"], "chat.completion.chunk");
  EXPECT_EQ(events[0]["choices"][0]["delta"], (OJson{{"role", "assistant"}, {"content", ""}}));
  std::string content;
  int finishes = 0;
  for (size_t i = 1; i + 1 < events.size(); ++i) {
    EXPECT_TRUE(events[i].contains("usage") && events[i]["usage"].is_null());
    const OJson& choice = events[i]["choices"][0];
    if (choice["delta"].contains("content")) content += choice["delta"]["content"].get<std::string>();
    if (!choice["finish_reason"].is_null()) {
      ++finishes;
      EXPECT_EQ(choice["finish_reason"], "stop");
    }
    EXPECT_EQ(events[i]["id"], events[0]["id"]);
  }
  EXPECT_EQ(content, "Hello world!");
  EXPECT_EQ(finishes, 1);
  const OJson& usage = events.back();
  EXPECT_EQ(usage["choices"], OJson::array());
  EXPECT_EQ(usage["usage"]["total_tokens"], 5);
}

TEST_P(GatewayServerTest, StreamedStopStringSplitAcrossTokensTruncatesAndEnds) {
  Harness h;
  h.worker().chunks = {{3}, {10}, {11}, {5}};  // "Hello" " wo" "rld" "!"
  const ClientResponse response =
      h.Post("/v1/chat/completions", ChatBody({{"stream", true}, {"stop", {"lo wor", "zzz"}}}));
  ASSERT_EQ(response.status, 200);
  bool done = false;
  const std::vector<OJson> events = SseEvents(response.body, &done);
  EXPECT_TRUE(done);
  std::string content;
  std::string finish;
  for (const OJson& event : events) {
    const OJson& choice = event["choices"][0];
    if (choice["delta"].contains("content")) content += choice["delta"]["content"].get<std::string>();
    if (!choice["finish_reason"].is_null()) finish = choice["finish_reason"];
  }
  EXPECT_EQ(content, "Hel");
  EXPECT_EQ(finish, "stop");
}

TEST_P(GatewayServerTest, ClientDisconnectMidStreamCancelsTheWorkerStream) {
  Harness h;
  h.worker().hang = true;
  HttpTestClient client(h.port());
  ASSERT_TRUE(client.SendRequest("POST", "/v1/chat/completions", ChatBody({{"stream", true}}).dump()));
  ClientResponse head;
  ASSERT_TRUE(client.ReadHead(&head));
  EXPECT_EQ(head.status, 200);
  std::string chunk;
  ASSERT_TRUE(client.ReadChunk(&chunk));  // the role chunk
  EXPECT_EQ(h.app().metrics().streams_in_flight(), 1);
  client.Close();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!h.worker().saw_cancel && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_TRUE(h.worker().saw_cancel);
  while (h.app().metrics().streams_in_flight() != 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(h.app().metrics().streams_in_flight(), 0);
}

TEST_P(GatewayServerTest, KeepAliveServesSeveralRequestsOnOneConnection) {
  Harness h;
  HttpTestClient client(h.port());
  EXPECT_EQ(client.Fetch("GET", "/health").status, 200);
  const ClientResponse chat = client.Fetch("POST", "/v1/chat/completions", ChatBody().dump());
  EXPECT_EQ(chat.status, 200);
  EXPECT_EQ(chat.headers.at("connection"), "keep-alive");
  const ClientResponse stream = client.Fetch("POST", "/v1/chat/completions", ChatBody({{"stream", true}}).dump());
  EXPECT_EQ(stream.status, 200);
  const ClientResponse models = client.Fetch("GET", "/v1/models");
  ASSERT_EQ(models.status, 200);
  EXPECT_EQ(ParseBody(models)["data"][0]["id"], "test-model");
  EXPECT_EQ(ParseBody(models)["data"][0]["max_model_len"], 64);
}

TEST_P(GatewayServerTest, CompletionsWithEchoAndTokenPrompts) {
  Harness h;
  ClientResponse response =
      h.Post("/v1/completions", OJson{{"model", "test-model"}, {"prompt", "hello"}, {"echo", true}});
  ASSERT_EQ(response.status, 200) << response.body;
  OJson body = ParseBody(response);
  EXPECT_EQ(body["object"], "text_completion");
  EXPECT_EQ(body["id"].get<std::string>().rfind("cmpl-", 0), 0u);
  EXPECT_EQ(body["choices"][0]["text"], "helloHello world!");
  EXPECT_EQ(h.worker().last_request.sampling().max_tokens(), 16);

  response = h.Post("/v1/completions", OJson{{"prompt", {{3, 4}, {5}}}, {"max_tokens", 4}, {"logprobs", 1}});
  ASSERT_EQ(response.status, 200) << response.body;
  body = ParseBody(response);
  ASSERT_EQ(body["choices"].size(), 2u);
  EXPECT_EQ(body["choices"][1]["text"], "Hello world!");
  EXPECT_EQ(body["choices"][0]["logprobs"]["tokens"], OJson::array({" Hello", " world", "!"}));
  EXPECT_EQ(body["choices"][0]["logprobs"]["text_offset"], OJson::array({0, 6, 12}));
  EXPECT_EQ(body["usage"]["prompt_tokens"], 3);
}

TEST_P(GatewayServerTest, CompletionsStreaming) {
  Harness h;
  const ClientResponse response =
      h.Post("/v1/completions", OJson{{"prompt", "hello"}, {"stream", true}, {"max_tokens", 3}});
  ASSERT_EQ(response.status, 200);
  bool done = false;
  std::string text;
  for (const OJson& event : SseEvents(response.body, &done)) {
    EXPECT_EQ(event["object"], "text_completion");
    text += event["choices"][0]["text"].get<std::string>();
  }
  EXPECT_TRUE(done);
  EXPECT_EQ(text, "Hello world!");
}

TEST_P(GatewayServerTest, ErrorStatuses) {
  Harness h;
  ClientResponse r = h.Get("/nope/route.x");
  EXPECT_EQ(r.status, 404);
  r = h.Post("/v1/nothing", OJson::object());
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(ParseBody(r)["error"]["type"], "not_found_error");

  r = h.Post("/v1/chat/completions", ChatBody({{"model", "gpt-4"}}));
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(ParseBody(r)["error"]["code"], "model_not_found");
  EXPECT_EQ(ParseBody(r)["error"]["param"], "model");

  r = h.Get("/v1/chat/completions");
  EXPECT_EQ(r.status, 405);
  EXPECT_EQ(r.headers.at("allow"), "POST");

  r = h.Post("/v1/chat/completions", ChatBody({{"temperature", -1}}));
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(ParseBody(r)["error"]["param"], "temperature");
  EXPECT_EQ(ParseBody(r)["error"]["type"], "invalid_request_error");

  HttpTestClient raw(h.port());
  r = raw.Fetch("POST", "/v1/chat/completions", "{not json");
  EXPECT_EQ(r.status, 400);

  OJson long_prompt = ChatBody();
  long_prompt["messages"][0]["content"] = "LONG";
  r = h.Post("/v1/chat/completions", long_prompt);
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(ParseBody(r)["error"]["param"], "messages");
  r = h.Post("/v1/chat/completions", ChatBody({{"max_tokens", 63}}));
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(ParseBody(r)["error"]["param"], "max_tokens");
  r = h.Post("/v1/completions", OJson{{"prompt", "x"}, {"suffix", "y"}});
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(ParseBody(r)["error"]["param"], "suffix");

  r = h.Post("/v1/chat/completions", ChatBody({{"padding", std::string(5000, 'x')}}));
  EXPECT_EQ(r.status, 413);
  EXPECT_EQ(r.headers.at("connection"), "close");
}

TEST_P(GatewayServerTest, WorkerQueueFullIs429WithRetryAfter) {
  Harness h;
  h.worker().fail = grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, "queue full");
  const ClientResponse r = h.Post("/v1/chat/completions", ChatBody({{"stream", true}}));
  EXPECT_EQ(r.status, 429);
  EXPECT_EQ(r.headers.at("retry-after"), "1");
  EXPECT_EQ(ParseBody(r)["error"]["type"], "rate_limit_error");
  // An HTTP error, not an event in a started stream.
  EXPECT_EQ(h.app().metrics().stream_error_events(StreamErrorReason::kWorkerFailed), 0);
}

TEST_P(GatewayServerTest, ErrorAfterTheStreamStartedIsAnErrorEvent) {
  Harness h;
  h.worker().chunks = {{3}};
  h.worker().finish = ernie::v1::FINISH_REASON_UNSPECIFIED;  // not finished when it fails
  h.worker().end_with = grpc::Status(grpc::StatusCode::INTERNAL, "engine step failed");  // after the stream began
  const ClientResponse r = h.Post("/v1/chat/completions", ChatBody({{"stream", true}}));
  EXPECT_EQ(r.status, 200);
  EXPECT_NE(r.body.find("data: {\"error\":"), std::string::npos) << r.body;
  EXPECT_EQ(r.body.find("[DONE]"), std::string::npos);
  // Counted before the event is sent, so it shows by the time the body has come.
  EXPECT_EQ(h.app().metrics().stream_error_events(StreamErrorReason::kWorkerFailed), 1);
  EXPECT_NE(h.Get("/metrics").body.find("reason=\"worker_failed\"} 1\n"),
            std::string::npos);
}

TEST_P(GatewayServerTest, RetriesOnAnotherWorkerWhenOneIsDown) {
  HarnessOptions options;
  options.workers = 2;
  Harness h(options);
  h.worker(0).fail = grpc::Status(grpc::StatusCode::UNAVAILABLE, "going away");
  h.worker(1).fail = grpc::Status(grpc::StatusCode::UNAVAILABLE, "going away");
  ClientResponse r = h.Post("/v1/chat/completions", ChatBody());
  EXPECT_EQ(r.status, 503);  // both tried
  EXPECT_EQ(h.worker(0).generate_calls + h.worker(1).generate_calls, 2);

  Harness h2(options);
  h2.worker(0).fail = grpc::Status(grpc::StatusCode::UNAVAILABLE, "going away");
  for (int i = 0; i < 3; ++i) {
    r = h2.Post("/v1/chat/completions", ChatBody());
    EXPECT_EQ(r.status, 200) << r.body;
  }
  // The failed worker was taken out after its first failure.
  EXPECT_LE(h2.worker(0).generate_calls, 1);
  EXPECT_EQ(h2.worker(1).generate_calls, 3);
}

TEST_P(GatewayServerTest, NotReadyWithoutAWorkerIs503) {
  HarnessOptions options;
  options.dead_worker_only = true;
  Harness h(options);
  EXPECT_EQ(h.Get("/health").status, 200);
  EXPECT_EQ(h.Get("/ready").status, 503);
  const ClientResponse r = h.Post("/v1/chat/completions", ChatBody());
  EXPECT_EQ(r.status, 503);
  EXPECT_EQ(ParseBody(r)["error"]["type"], "service_unavailable_error");
}

TEST_P(GatewayServerTest, ApiKeysGuardTheApiButNotHealthOrMetrics) {
  HarnessOptions options;
  options.api_keys = {"sk-test"};
  Harness h(options);
  ClientResponse r = h.Post("/v1/chat/completions", ChatBody());
  EXPECT_EQ(r.status, 401);
  EXPECT_EQ(ParseBody(r)["error"]["type"], "authentication_error");
  EXPECT_EQ(h.Post("/v1/chat/completions", ChatBody(), "Authorization: Bearer sk-wrong\r\n").status, 401);
  EXPECT_EQ(h.Post("/v1/chat/completions", ChatBody(), "Authorization: Bearer sk-test\r\n").status, 200);
  EXPECT_EQ(h.Get("/v1/models").status, 401);
  EXPECT_EQ(h.Get("/health").status, 200);
  EXPECT_EQ(h.Get("/metrics").status, 200);
}

TEST_P(GatewayServerTest, TokenizeDetokenizeReadyVersionMetrics) {
  Harness h;
  ClientResponse r = h.Post("/tokenize", OJson{{"model", "test-model"}, {"prompt", "hello"}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(ParseBody(r)["tokens"], OJson::array({3}));
  EXPECT_EQ(ParseBody(r)["count"], 1);
  EXPECT_EQ(ParseBody(r)["max_model_len"], 64);
  r = h.Post("/tokenize", OJson{{"messages", OJson::array({{{"role", "user"}, {"content", "a"}}})}});
  EXPECT_EQ(ParseBody(r)["tokens"], OJson::array({1, 3}));
  r = h.Post("/detokenize", OJson{{"tokens", {3, 4, 5}}});
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(ParseBody(r)["prompt"], "Hello world!");
  r = h.Post("/detokenize", OJson{{"tokens", {3, 4000}}});
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(ParseBody(r)["error"]["param"], "tokens[1]");

  EXPECT_EQ(h.Get("/ready").status, 200);
  EXPECT_EQ(ParseBody(h.Get("/version"))["version"], "9.9.9");
  h.Post("/v1/chat/completions", ChatBody());
  r = h.Get("/metrics");
  EXPECT_EQ(r.status, 200);
  EXPECT_NE(r.body.find("route=\"/v1/chat/completions\",status=\"200\"} 1"),
            std::string::npos)
      << r.body;
}

TEST_P(GatewayServerTest, ServesTheChatPageAndCorsWhenAsked) {
  HarnessOptions options;
  options.cors = true;
  Harness h(options);
  ClientResponse r = h.Get("/");
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "<html>chat</html>");
  EXPECT_EQ(r.headers.at("content-type"), "text/html; charset=utf-8");
  r = h.Get("/web/app.js");
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.headers.at("content-type"), "text/javascript; charset=utf-8");
  EXPECT_EQ(h.Get("/missing.css").status, 404);
  EXPECT_EQ(h.Get("/web/../../etc/passwd").status, 404);

  HttpTestClient client(h.port());
  r = client.Fetch("OPTIONS", "/v1/chat/completions", "",
                   "Origin: http://example\r\nAccess-Control-Request-Method: POST\r\n");
  EXPECT_EQ(r.status, 204);
  EXPECT_EQ(r.headers.at("access-control-allow-origin"), "*");
  EXPECT_NE(r.headers.at("access-control-allow-headers").find("Authorization"), std::string::npos);
  EXPECT_EQ(h.Post("/v1/chat/completions", ChatBody()).headers.at("access-control-allow-origin"), "*");
}

}  // namespace
}  // namespace ernie::gateway

// SSE framing, streamed text chunks, gRPC status -> HTTP mapping, worker
// choice, API keys, context-length budgets, static file types and metrics text.
#include <gtest/gtest.h>

#include "gateway/http/http_message.h"
#include "gateway/http/sse.h"
#include "gateway/openai/context_length.h"
#include "gateway/openai/response_json.h"
#include "gateway/routes/api_keys.h"
#include "gateway/routes/gateway_metrics.h"
#include "gateway/routes/static_files.h"
#include "gateway/upstream/grpc_status_map.h"
#include "gateway/upstream/prefix_affinity_table.h"
#include "gateway/upstream/worker_choice.h"

namespace ernie::gateway {
namespace {

TEST(SseTest, EventsAreDataLinesAndABlankLine) {
  EXPECT_EQ(SseEvent(R"({"a":1})"), "data: {\"a\":1}\n\n");
  EXPECT_EQ(SseEvent("x\ny"), "data: x\ndata: y\n\n");
  EXPECT_EQ(kSseDone, "data: [DONE]\n\n");
}

// The template's chunk is ChoiceChunk's, byte for byte, for both APIs,
// with and without usage, for texts JSON must escape (quotes, backslashes,
// control characters, non-ASCII, invalid UTF-8 replaced) and for headers
// that hold the characters the template's marker is made of.
TEST(TextChunkTemplateTest, RendersWhatChoiceChunkDumps) {
  const std::vector<std::string> texts = {"a", " the", "\"quoted\" \\ back", "tab\tnew\nline\x01\x7f",
                                          "\xE4\xBD\xA0\xE5\xA5\xBD", "bad \xC3 utf8 \xFF", std::string(3000, 'x'),
                                          "\x01\x02text\x02\x01"};
  for (const ApiKind kind : {ApiKind::kChat, ApiKind::kCompletion}) {
    for (const std::string& model : {std::string("m"), std::string("odd \x01\x02text\x02\x01 \"name\"")}) {
      const ResponseHeader header{.kind = kind, .id = "cmpl-123", .created = 1796000000, .model = model};
      for (const bool usage : {false, true}) {
        for (const int index : {0, 3}) {
          const TextChunkTemplate chunk(header, index, usage);
          for (const std::string& text : texts) {
            EXPECT_EQ(chunk.Render(text), ChoiceChunk(header, index, text, false, std::nullopt, std::nullopt, usage)
                                              .dump(-1, ' ', false, OutJson::error_handler_t::replace))
                << "kind " << static_cast<int>(kind) << " usage " << usage << " text " << text;
          }
        }
      }
    }
  }
}

TEST(HttpMessageTest, ChunkFramingAndHeads) {
  EXPECT_EQ(SerializeChunk("hello"), "5\r\nhello\r\n");
  EXPECT_EQ(SerializeChunk(std::string(26, 'x')).substr(0, 4), "1a\r\n");
  EXPECT_EQ(SerializeChunk(""), "");  // would end the body
  const std::string head = SerializeStreamHead(HttpResponse{.content_type = "text/event-stream"}, true);
  EXPECT_EQ(head.rfind("HTTP/1.1 200 OK\r\n", 0), 0u);
  EXPECT_NE(head.find("Transfer-Encoding: chunked\r\n\r\n"), std::string::npos);
  const std::string full = SerializeResponse(HttpResponse{.status = 404, .body = "{}"}, false);
  EXPECT_NE(full.find("HTTP/1.1 404 Not Found\r\n"), std::string::npos);
  EXPECT_NE(full.find("Connection: close\r\n"), std::string::npos);
  EXPECT_NE(full.find("Content-Length: 2\r\n\r\n{}"), std::string::npos);
}

TEST(GrpcStatusMapTest, EveryCodeHasItsHttpStatus) {
  using C = grpc::StatusCode;
  const std::vector<std::pair<C, int>> expected = {
      {C::OK, 200}, {C::INVALID_ARGUMENT, 400}, {C::OUT_OF_RANGE, 400}, {C::FAILED_PRECONDITION, 400},
      {C::UNAUTHENTICATED, 401}, {C::PERMISSION_DENIED, 403}, {C::NOT_FOUND, 404}, {C::ALREADY_EXISTS, 409},
      {C::RESOURCE_EXHAUSTED, 429}, {C::CANCELLED, 499}, {C::UNIMPLEMENTED, 501}, {C::UNAVAILABLE, 503},
      {C::ABORTED, 503}, {C::DEADLINE_EXCEEDED, 504}, {C::INTERNAL, 500}, {C::UNKNOWN, 500}, {C::DATA_LOSS, 500}};
  for (const auto& [code, http] : expected) EXPECT_EQ(HttpStatusForGrpcCode(code), http) << static_cast<int>(code);
}

TEST(GrpcStatusMapTest, QueueFullIs429WithRetryAfter) {
  const ApiError error = ApiErrorFromGrpc(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, "queue full"), "worker");
  EXPECT_EQ(error.status, 429);
  EXPECT_EQ(error.type, "rate_limit_error");
  ASSERT_TRUE(error.retry_after_seconds.has_value());
  EXPECT_EQ(*error.retry_after_seconds, 1);
  const ApiError bad = ApiErrorFromStatus(absl::InvalidArgumentError("bad template"), "tokenizer");
  EXPECT_EQ(bad.status, 400);
  EXPECT_EQ(bad.message, "bad template");
}

TEST(ApiErrorTest, JsonShape) {
  const ApiError error = BadField("temperature", "too hot");
  EXPECT_EQ(error.ToJsonString(),
            R"({"error":{"code":null,"message":"too hot","param":"temperature","type":"invalid_request_error"}})");
}

TEST(WorkerChoiceTest, LeastLoadedHealthyWorkerWins) {
  std::vector<WorkerLoadView> workers = {{.healthy = true, .running = 5, .waiting = 2},
                                         {.healthy = true, .running = 1},
                                         {.healthy = false, .running = 0}};
  EXPECT_EQ(ChooseWorker(workers, {}, std::nullopt), 1u);
  // In-flight requests sent since the last poll count too.
  workers[1].in_flight = 9;
  EXPECT_EQ(ChooseWorker(workers, {}, std::nullopt), 0u);
}

TEST(WorkerChoiceTest, KvUsageCountsInTheScore) {
  std::vector<WorkerLoadView> workers = {{.healthy = true, .running = 1, .kv_blocks_used = 100, .kv_blocks_total = 100},
                                         {.healthy = true, .running = 2, .kv_blocks_used = 0, .kv_blocks_total = 100}};
  EXPECT_EQ(ChooseWorker(workers, {}, std::nullopt), 1u);
}

TEST(WorkerChoiceTest, AffinityWinsWhenLoadsAreClose) {
  std::vector<WorkerLoadView> workers = {{.healthy = true, .running = 3}, {.healthy = true, .running = 2}};
  EXPECT_EQ(ChooseWorker(workers, {}, 0), 0u);  // 3 is within 2 of 2
  workers[0].running = 10;
  EXPECT_EQ(ChooseWorker(workers, {}, 0), 1u);  // too far: least load wins
}

TEST(WorkerChoiceTest, FailedExcludedAndUnhealthyWorkersAreSkipped) {
  std::vector<WorkerLoadView> workers = {{.healthy = true}, {.healthy = true, .running = 4}, {.healthy = false}};
  const std::vector<size_t> excluded = {0};
  EXPECT_EQ(ChooseWorker(workers, excluded, 2), 1u);  // affinity to an unhealthy worker is ignored
  const std::vector<size_t> all = {0, 1};
  EXPECT_FALSE(ChooseWorker(workers, all, std::nullopt).has_value());
}

TEST(WorkerChoiceTest, PrefixKeyCoversOnlyTheFirst256Tokens) {
  std::vector<int32_t> a(300, 7), b(300, 7);
  b[299] = 8;
  EXPECT_EQ(PrefixAffinityKey(a), PrefixAffinityKey(b));
  b[10] = 8;
  EXPECT_NE(PrefixAffinityKey(a), PrefixAffinityKey(b));
}

TEST(PrefixAffinityTableTest, RemembersTheLastWorkerOfAPrefix) {
  PrefixAffinityTable table(4);
  EXPECT_FALSE(table.Find(42).has_value());
  table.Record(42, 3);
  EXPECT_EQ(table.Find(42), 3u);
  table.Record(42, 5);  // served again elsewhere: the newer worker
  EXPECT_EQ(table.Find(42), 5u);
  EXPECT_FALSE(table.Find(43).has_value());
}

TEST(PrefixAffinityTableTest, StaysItsSizeAndKeepsTheNewestKeys) {
  // 16 slots and a million prefixes: the table never grows, a key that
  // shares a slot with a newer one is forgotten (a hint, not a record), and
  // a key is never reported for a worker it was not recorded with.
  PrefixAffinityTable table(4);
  for (uint64_t key = 1; key <= 1000000; ++key) table.Record(key * 0x100000001ull, static_cast<uint32_t>(key % 7));
  EXPECT_EQ(table.capacity(), 16u);
  EXPECT_EQ(table.Find(1000000 * 0x100000001ull), 1000000u % 7);
  int remembered = 0;
  for (uint64_t key = 1; key <= 1000000; ++key) {
    const auto found = table.Find(key * 0x100000001ull);
    if (!found) continue;
    ++remembered;
    EXPECT_EQ(*found, key % 7) << key;
  }
  EXPECT_GT(remembered, 0);
  EXPECT_LE(remembered, 16);
}

TEST(ApiKeysTest, BearerKeysAreChecked) {
  ApiKeys none({});
  EXPECT_TRUE(none.Allows(""));
  ApiKeys keys({"sk-one", "sk-two"});
  EXPECT_TRUE(keys.Allows("Bearer sk-one"));
  EXPECT_TRUE(keys.Allows("bearer sk-two"));
  EXPECT_FALSE(keys.Allows("Bearer sk-on"));
  EXPECT_FALSE(keys.Allows("Bearer sk-one1"));
  EXPECT_FALSE(keys.Allows("sk-one"));
  EXPECT_FALSE(keys.Allows(""));
  EXPECT_TRUE(ConstantTimeEquals("abc", "abc"));
  EXPECT_FALSE(ConstantTimeEquals("abc", "abd"));
  EXPECT_FALSE(ConstantTimeEquals("abc", "ab"));
}

TEST(ContextLengthTest, BudgetsAndErrors) {
  EXPECT_EQ(std::get<int32_t>(ResolveMaxTokens(10, 5, 64, std::nullopt, "messages")), 5);
  EXPECT_EQ(std::get<int32_t>(ResolveMaxTokens(10, std::nullopt, 64, std::nullopt, "messages")), 54);
  EXPECT_EQ(std::get<int32_t>(ResolveMaxTokens(10, std::nullopt, 64, 20, "messages")), 20);
  const ApiError over = std::get<ApiError>(ResolveMaxTokens(10, 60, 64, std::nullopt, "messages"));
  EXPECT_EQ(over.status, 400);
  EXPECT_EQ(over.param, "max_tokens");
  EXPECT_NE(over.message.find("maximum context length is 64 tokens"), std::string::npos);
  EXPECT_NE(over.message.find("you requested 70 tokens (10 in the messages, 60 in the completion)"),
            std::string::npos);
  const ApiError full = std::get<ApiError>(ResolveMaxTokens(64, std::nullopt, 64, std::nullopt, "prompt"));
  EXPECT_EQ(full.param, "prompt");
}

TEST(StaticFilesTest, ContentTypesAndEscapes) {
  EXPECT_EQ(ContentTypeForPath("/web/app.js"), "text/javascript; charset=utf-8");
  EXPECT_EQ(ContentTypeForPath("index.html"), "text/html; charset=utf-8");
  EXPECT_EQ(ContentTypeForPath("style.css"), "text/css; charset=utf-8");
  EXPECT_EQ(ContentTypeForPath("blob"), "application/octet-stream");
  EXPECT_FALSE(ServeStaticFile("/etc", "/../etc/passwd").has_value());
  EXPECT_FALSE(ServeStaticFile("/nonexistent-dir", "/").has_value());
}

TEST(GatewayMetricsTest, Exposition) {
  GatewayMetrics metrics;
  metrics.CountRequest("/v1/chat/completions", 200);
  metrics.CountRequest("/v1/chat/completions", 200);
  metrics.StreamStarted();
  const std::string text = metrics.Exposition();
  EXPECT_NE(text.find("ernie_gateway_requests_total{route=\"/v1/chat/completions\",status=\"200\"} 2\n"),
            std::string::npos);
  EXPECT_NE(text.find("ernie_gateway_streams_in_flight 1\n"), std::string::npos);
  EXPECT_NE(text.find("# TYPE ernie_gateway_requests_total counter"), std::string::npos);
}

// Every reason is a series from the start (rates see the first failure).
TEST(GatewayMetricsTest, StreamErrorEventsByReason) {
  GatewayMetrics metrics;
  metrics.StreamErrorEvent(StreamErrorReason::kWorkerFailed);
  metrics.StreamErrorEvent(StreamErrorReason::kWorkerFailed);
  metrics.StreamErrorEvent(StreamErrorReason::kInvalidWorkerOutput);
  EXPECT_EQ(metrics.stream_error_events(StreamErrorReason::kWorkerFailed), 2);
  EXPECT_EQ(metrics.stream_error_events(StreamErrorReason::kNoWorker), 0);
  const std::string text = metrics.Exposition();
  EXPECT_NE(text.find("# TYPE ernie_gateway_stream_error_events_total counter\n"), std::string::npos);
  EXPECT_NE(text.find("ernie_gateway_stream_error_events_total{reason=\"worker_failed\"} 2\n"), std::string::npos);
  EXPECT_NE(text.find("ernie_gateway_stream_error_events_total{reason=\"no_worker\"} 0\n"), std::string::npos);
  EXPECT_NE(text.find("ernie_gateway_stream_error_events_total{reason=\"invalid_worker_output\"} 1\n"),
            std::string::npos);
}

}  // namespace
}  // namespace ernie::gateway

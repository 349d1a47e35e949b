// Tokenizer benchmark (not a test): encode throughput of mixed Chinese /
// English text, the incremental detokenizer alone on one core (target
// >= 2M tokens/s), ApplyChatTemplate latency for a 20-turn conversation, and
// DecodeStream over loopback gRPC with 256 concurrent streams.
//
//   ernie_bench_tokenizer MODEL_DIR [TEXT_OUT]
// TEXT_OUT receives the encoded text so tokenizer_bench.sh can time
// python3-sentencepiece on the same bytes. Prints "name value unit" lines.
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <thread>

#include "services/tokenizer/detokenizer/incremental_detokenizer.h"
#include "services/tokenizer/tokenizer_server.h"

namespace {

using Clock = std::chrono::steady_clock;
double Seconds(Clock::time_point since) { return std::chrono::duration<double>(Clock::now() - since).count(); }

std::vector<std::string> MixedLines() {
  const std::vector<std::string> base = {
      "深度学习模型在自然语言处理任务中表现出色，例如机器翻译和文本摘要。",
      "The tokenizer service encodes prompts and decodes streamed tokens for the gateway.",
      "混合文本 mixed text with numbers 12345 and punctuation: (a, b) -> c; 完成！",
      "def encode(text):\n    return [ord(c) for c in text]  # 示例代码\n",
      "百度文心 ERNIE-4.5 supports long context windows up to 131072 tokens.",
  };
  std::vector<std::string> lines;
  while (lines.size() < 4000) lines.insert(lines.end(), base.begin(), base.end());
  return lines;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: ernie_bench_tokenizer MODEL_DIR [TEXT_OUT]\n");
    return 2;
  }
  auto loaded = ernie::tokenizer::Tokenizer::Load(argv[1]);
  if (!loaded.ok()) {
    std::fprintf(stderr, "%s\n", loaded.status().ToString().c_str());
    return 1;
  }
  std::shared_ptr<const ernie::tokenizer::Tokenizer> tokenizer(std::move(loaded).value());
  const std::vector<std::string> lines = MixedLines();
  if (argc > 2) {
    std::ofstream out(argv[2], std::ios::binary);
    for (const std::string& line : lines) out << line << '\x1e';  // record separator between lines
  }

  // 1. Encode throughput.
  size_t bytes = 0;
  std::vector<int32_t> all_ids;
  Clock::time_point start = Clock::now();
  for (const std::string& line : lines) {
    auto encoded = tokenizer->Encode(line, {});
    if (!encoded.ok()) return 1;
    bytes += line.size();
    all_ids.insert(all_ids.end(), encoded->ids.begin(), encoded->ids.end());
  }
  std::printf("encode_cpp %.2f MB/s\n", bytes / 1e6 / Seconds(start));

  // 2. Incremental detokenizer, one id per call, one core.
  ernie::tokenizer::IncrementalDetokenizer detokenizer(tokenizer->detokenizer_table(), true);
  std::string delta;
  delta.reserve(256);
  size_t tokens = 0;
  start = Clock::now();
  for (int round = 0; round < 20; ++round) {
    for (int32_t id : all_ids) {
      delta.clear();
      if (!detokenizer.Append({&id, 1}, &delta).ok()) return 1;
    }
    tokens += all_ids.size();
  }
  std::printf("detokenizer %.2f Mtokens/s\n", tokens / 1e6 / Seconds(start));

  // 3. ApplyChatTemplate, 20 turns.
  ernie::tokenizer::ChatRequest chat;
  for (int turn = 0; turn < 20; ++turn) {
    chat.messages.push_back({{"role", turn % 2 == 0 ? "user" : "assistant"}, {"content", lines[turn % 5]}});
  }
  const int renders = 2000;
  start = Clock::now();
  for (int i = 0; i < renders; ++i) {
    if (!tokenizer->ApplyChatTemplate(chat).ok()) return 1;
  }
  std::printf("chat_template_20_turns %.1f us\n", Seconds(start) / renders * 1e6);

  // 4. DecodeStream, 256 concurrent streams over loopback.
  auto server = ernie::tokenizer::TokenizerServer::Start(tokenizer, {.port = 0});
  if (!server.ok()) return 1;
  auto channel = grpc::CreateChannel((*server)->address(), grpc::InsecureChannelCredentials());
  auto stub = ernie::v1::Tokenizer::NewStub(channel);
  const int streams = 256, messages = 64, ids_per_message = 4;
  std::vector<std::thread> clients;
  std::atomic<int> failures{0};
  start = Clock::now();
  for (int s = 0; s < streams; ++s) {
    clients.emplace_back([&, s] {
      grpc::ClientContext context;
      auto stream = stub->DecodeStream(&context);
      ernie::v1::DecodeStreamRequest request;
      ernie::v1::DecodeStreamResponse response;
      for (int m = 0; m < messages; ++m) {
        request.clear_ids();
        for (int k = 0; k < ids_per_message; ++k) {
          request.add_ids(all_ids[(static_cast<size_t>(s) * 997 + m * ids_per_message + k) % all_ids.size()]);
        }
        if (!stream->Write(request) || !stream->Read(&response)) {
          ++failures;
          return;
        }
      }
      stream->WritesDone();
      while (stream->Read(&response)) {
      }
      if (!stream->Finish().ok()) ++failures;
    });
  }
  for (std::thread& client : clients) client.join();
  const double elapsed = Seconds(start);
  std::printf("decode_stream_256 %.0f tokens/s (%d failures)\n",
              static_cast<double>(streams) * messages * ids_per_message / elapsed, failures.load());
  (*server)->Shutdown();
  return failures.load() == 0 ? 0 : 1;
}

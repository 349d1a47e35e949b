// The tokenizer service as the gateway uses it: the vocabulary fetched once
// (retried in the background until the service answers) and turned into the
// shared detokenizer table, plus asynchronous Encode / ApplyChatTemplate.
// Thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "ernie/v1/tokenizer.grpc.pb.h"
#include "grpcpp/security/credentials.h"
#include "services/tokenizer/detokenizer/detokenizer_table.h"

namespace ernie::gateway {

class TokenizerClient {
 public:
  // `credentials` null: plaintext. `tls_server_name`: the name to check the
  // server's certificate against ("": the address's host).
  explicit TokenizerClient(const std::string& address,
                           std::shared_ptr<grpc::ChannelCredentials> credentials = nullptr,
                           const std::string& tls_server_name = "");
  ~TokenizerClient();  // Stop()s

  // Fetches the vocabulary in the background, every `retry` until it works.
  void Start(std::chrono::milliseconds retry = std::chrono::milliseconds(500));
  void Stop();
  // Blocks up to `timeout` for the vocabulary; true once it is loaded.
  bool WaitReady(std::chrono::milliseconds timeout);

  bool ready() const;
  // Null until ready.
  std::shared_ptr<const tokenizer::DetokenizerTable> table() const;
  int32_t vocab_size() const;           // 0 until ready
  int32_t model_max_length() const;     // from Info; 0 when unknown

  using EncodeDone = std::function<void(absl::StatusOr<std::vector<int32_t>>)>;
  void Encode(const std::string& text, bool add_special_tokens, const std::string& request_id, EncodeDone done);
  void ApplyChatTemplate(const ernie::v1::ChatInput& chat, const std::string& request_id, EncodeDone done);

 private:
  void FetchLoop(std::chrono::milliseconds retry);
  absl::Status FetchOnce();

  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<ernie::v1::Tokenizer::Stub> stub_;
  mutable std::mutex mutex_;  // guards table_, model_max_length_, stopping_
  std::condition_variable changed_;
  std::shared_ptr<const tokenizer::DetokenizerTable> table_;
  int32_t vocab_size_ = 0;
  int32_t model_max_length_ = 0;
  bool stopping_ = false;
  std::thread fetcher_;
};

// ernie.v1.Vocabulary -> the detokenizer's Vocabulary (the inverse of the
// tokenizer service's conversion, field for field).
tokenizer::Vocabulary VocabularyFromProto(const ernie::v1::Vocabulary& proto);

}  // namespace ernie::gateway

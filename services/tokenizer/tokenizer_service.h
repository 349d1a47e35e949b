// ernie.v1.Tokenizer over gRPC's callback API. Unary RPCs finish inline on
// the callback thread (tokenization is CPU work that never blocks);
// DecodeStream is one reactor per stream (decode_stream_reactor.h), no
// thread per stream. Every error is a grpc::Status; no exception leaves a
// handler.
#pragma once

#include <cstdint>
#include <memory>

#include "ernie/v1/tokenizer.grpc.pb.h"
#include "services/tokenizer/tokenizer.h"
#include "services/tokenizer/tokenizer_metrics.h"

namespace ernie::tokenizer {

struct TokenizerServiceOptions {
  // Largest accepted input: text or chat JSON bytes, or 4 bytes per id.
  // Beyond it: RESOURCE_EXHAUSTED.
  int64_t max_input_bytes = 1 << 20;
  // Calls and latencies are recorded here when set (not owned; outlives the service).
  TokenizerMetrics* metrics = nullptr;
};

class TokenizerService final : public ernie::v1::Tokenizer::CallbackService {
 public:
  TokenizerService(std::shared_ptr<const Tokenizer> tokenizer, TokenizerServiceOptions options);

  grpc::ServerUnaryReactor* Encode(grpc::CallbackServerContext* context, const ernie::v1::EncodeRequest* request,
                                   ernie::v1::EncodeResponse* response) override;
  grpc::ServerUnaryReactor* Decode(grpc::CallbackServerContext* context, const ernie::v1::DecodeRequest* request,
                                   ernie::v1::DecodeResponse* response) override;
  grpc::ServerUnaryReactor* ApplyChatTemplate(grpc::CallbackServerContext* context,
                                              const ernie::v1::ApplyChatTemplateRequest* request,
                                              ernie::v1::ApplyChatTemplateResponse* response) override;
  grpc::ServerBidiReactor<ernie::v1::DecodeStreamRequest, ernie::v1::DecodeStreamResponse>* DecodeStream(
      grpc::CallbackServerContext* context) override;
  grpc::ServerUnaryReactor* Info(grpc::CallbackServerContext* context, const ernie::v1::InfoRequest* request,
                                 ernie::v1::TokenizerInfo* response) override;
  grpc::ServerUnaryReactor* GetVocabulary(grpc::CallbackServerContext* context,
                                          const ernie::v1::VocabularyRequest* request,
                                          ernie::v1::Vocabulary* response) override;

 private:
  std::shared_ptr<const Tokenizer> tokenizer_;  // shared, immutable
  TokenizerServiceOptions options_;
  ernie::v1::Vocabulary vocabulary_message_;  // built once: GetVocabulary's answer
};

}  // namespace ernie::tokenizer

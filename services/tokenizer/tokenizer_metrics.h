// The tokenizer service's Prometheus metrics: calls by method and gRPC
// status code, and call latency by method:
//   ernie_tokenizer_requests_total{method,code}
//   ernie_tokenizer_request_duration_seconds{method}
// Record() is lock-free for successful calls (their series are looked up
// once); an error's series is looked up when it happens.
#pragma once

#include <array>
#include <memory>

#include <grpcpp/support/status.h>

#include "absl/status/statusor.h"
#include "services/common/metrics/registry.h"

namespace ernie::tokenizer {

enum class TokenizerMethod { kEncode, kDecode, kApplyChatTemplate, kInfo, kGetVocabulary };

class TokenizerMetrics {
 public:
  static absl::StatusOr<std::unique_ptr<TokenizerMetrics>> Create(metrics::Registry& registry);
  void Record(TokenizerMethod method, grpc::StatusCode code, double seconds);

 private:
  static constexpr size_t kMethods = 5;
  TokenizerMetrics() = default;
  metrics::Family<metrics::Counter, 2>* requests_ = nullptr;  // owned by the registry
  std::array<metrics::Counter*, kMethods> ok_{};              // code="OK" per method
  std::array<metrics::Histogram*, kMethods> duration_{};
};

// "OK", "INVALID_ARGUMENT", ... as gRPC spells them.
const char* GrpcCodeName(grpc::StatusCode code);

}  // namespace ernie::tokenizer

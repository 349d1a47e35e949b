#include "services/tokenizer/tokenizer_metrics.h"

#include "engine/util/status_macros.h"

namespace ernie::tokenizer {
namespace {

constexpr std::array<const char*, 5> kMethodNames = {"Encode", "Decode", "ApplyChatTemplate", "Info",
                                                     "GetVocabulary"};

std::vector<double> TokenizerLatencyBuckets() {
  return {0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5};
}

}  // namespace

const char* GrpcCodeName(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::OK: return "OK";
    case grpc::StatusCode::CANCELLED: return "CANCELLED";
    case grpc::StatusCode::UNKNOWN: return "UNKNOWN";
    case grpc::StatusCode::INVALID_ARGUMENT: return "INVALID_ARGUMENT";
    case grpc::StatusCode::DEADLINE_EXCEEDED: return "DEADLINE_EXCEEDED";
    case grpc::StatusCode::NOT_FOUND: return "NOT_FOUND";
    case grpc::StatusCode::ALREADY_EXISTS: return "ALREADY_EXISTS";
    case grpc::StatusCode::PERMISSION_DENIED: return "PERMISSION_DENIED";
    case grpc::StatusCode::RESOURCE_EXHAUSTED: return "RESOURCE_EXHAUSTED";
    case grpc::StatusCode::FAILED_PRECONDITION: return "FAILED_PRECONDITION";
    case grpc::StatusCode::ABORTED: return "ABORTED";
    case grpc::StatusCode::OUT_OF_RANGE: return "OUT_OF_RANGE";
    case grpc::StatusCode::UNIMPLEMENTED: return "UNIMPLEMENTED";
    case grpc::StatusCode::INTERNAL: return "INTERNAL";
    case grpc::StatusCode::UNAVAILABLE: return "UNAVAILABLE";
    case grpc::StatusCode::DATA_LOSS: return "DATA_LOSS";
    case grpc::StatusCode::UNAUTHENTICATED: return "UNAUTHENTICATED";
    default: return "UNKNOWN";
  }
}

absl::StatusOr<std::unique_ptr<TokenizerMetrics>> TokenizerMetrics::Create(metrics::Registry& registry) {
  std::unique_ptr<TokenizerMetrics> m(new TokenizerMetrics());
  ERNIE_ASSIGN_OR_RETURN(m->requests_, registry.AddCounter<2>("ernie_tokenizer_requests_total",
                                                              "Tokenizer gRPC calls by method and status code.",
                                                              {"method", "code"}));
  ERNIE_ASSIGN_OR_RETURN(auto* duration,
                         registry.AddHistogram<1>("ernie_tokenizer_request_duration_seconds",
                                                  "Time to answer one tokenizer gRPC call, by method.",
                                                  TokenizerLatencyBuckets(), {"method"}));
  for (size_t i = 0; i < kMethods; ++i) {
    m->ok_[i] = &m->requests_->WithLabels({kMethodNames[i], "OK"});
    m->duration_[i] = &duration->WithLabels({kMethodNames[i]});
  }
  return m;
}

void TokenizerMetrics::Record(TokenizerMethod method, grpc::StatusCode code, double seconds) {
  const auto i = static_cast<size_t>(method);
  if (code == grpc::StatusCode::OK) {
    ok_[i]->Increment();
  } else {
    requests_->WithLabels({kMethodNames[i], GrpcCodeName(code)}).Increment();
  }
  duration_[i]->Observe(seconds);
}

}  // namespace ernie::tokenizer

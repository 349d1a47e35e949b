// A running tokenizer gRPC server: the Tokenizer service plus the standard
// grpc.health.v1 service, SERVING once started.
#pragma once

#include <memory>
#include <string>

#include <grpcpp/server.h>

#include "absl/status/statusor.h"
#include "services/common/grpc_tls.h"
#include "services/tokenizer/tokenizer_service.h"

namespace ernie::tokenizer {

struct TokenizerServerOptions {
  std::string host = "127.0.0.1";
  int port = 50051;  // 0 picks a free port
  services::TlsFiles tls;  // none: plaintext; cert + key: TLS; + ca: mutual TLS
  TokenizerServiceOptions service;
};

class TokenizerServer {
 public:
  // Unavailable when the address cannot be bound.
  static absl::StatusOr<std::unique_ptr<TokenizerServer>> Start(std::shared_ptr<const Tokenizer> tokenizer,
                                                                 const TokenizerServerOptions& options);
  ~TokenizerServer();  // shuts down

  int port() const { return port_; }
  std::string address() const;
  // Marks the server NOT_SERVING, then stops it, letting calls in flight
  // finish for up to a second. Idempotent.
  void Shutdown();

 private:
  TokenizerServer() = default;

  std::unique_ptr<TokenizerService> service_;  // outlives server_
  std::unique_ptr<grpc::Server> server_;
  std::string host_;
  int port_ = 0;
  bool shut_down_ = false;
};

}  // namespace ernie::tokenizer

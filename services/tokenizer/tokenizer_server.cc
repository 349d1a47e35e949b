#include "services/tokenizer/tokenizer_server.h"

#include <chrono>

#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server_builder.h>

#include "absl/strings/str_cat.h"

namespace ernie::tokenizer {

absl::StatusOr<std::unique_ptr<TokenizerServer>> TokenizerServer::Start(std::shared_ptr<const Tokenizer> tokenizer,
                                                                        const TokenizerServerOptions& options) {
  std::unique_ptr<TokenizerServer> server(new TokenizerServer());
  server->host_ = options.host;
  server->service_ = std::make_unique<TokenizerService>(std::move(tokenizer), options.service);
  auto credentials = services::MakeServerCredentials(options.tls);
  if (!credentials.ok()) return credentials.status();
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  const std::string address = absl::StrCat(options.host, ":", options.port);
  builder.AddListeningPort(address, *credentials, &server->port_);
  builder.RegisterService(server->service_.get());
  // Leave room above the input limit so our own check (with its message)
  // answers oversized requests rather than the transport.
  const int64_t receive_limit = std::max<int64_t>(4 << 20, 2 * options.service.max_input_bytes + (1 << 20));
  builder.SetMaxReceiveMessageSize(static_cast<int>(std::min<int64_t>(receive_limit, INT32_MAX)));
  builder.SetMaxSendMessageSize(-1);
  server->server_ = builder.BuildAndStart();
  if (server->server_ == nullptr || server->port_ == 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", address));
  }
  grpc::HealthCheckServiceInterface* health = server->server_->GetHealthCheckService();
  if (health != nullptr) {
    health->SetServingStatus(true);
    health->SetServingStatus("ernie.v1.Tokenizer", true);
  }
  return server;
}

TokenizerServer::~TokenizerServer() { Shutdown(); }

std::string TokenizerServer::address() const { return absl::StrCat(host_, ":", port_); }

void TokenizerServer::Shutdown() {
  if (shut_down_ || server_ == nullptr) return;
  shut_down_ = true;
  if (grpc::HealthCheckServiceInterface* health = server_->GetHealthCheckService()) health->SetServingStatus(false);
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  server_->Wait();
}

}  // namespace ernie::tokenizer

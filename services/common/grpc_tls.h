// TLS and mutual TLS for the gRPC links between the gateway, the tokenizer
// and the workers. A server with a certificate and key serves TLS; given a
// CA as well, it requires every client to present a certificate that CA
// signed (mutual TLS). A client with a CA verifies the server against it;
// given a certificate and key as well, it presents them. Without any file
// both sides stay plaintext (the default, on loopback).
#pragma once

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/security/server_credentials.h"

namespace ernie::services {

struct TlsFiles {
  std::string cert_file;  // PEM certificate (server: its own; client: for mutual TLS)
  std::string key_file;   // PEM private key of cert_file
  std::string ca_file;    // PEM CA (server: clients must be signed by it; client: the server must be)

  bool any() const { return !cert_file.empty() || !key_file.empty() || !ca_file.empty(); }
  // InvalidArgument naming `flag_prefix`-cert / -key when only one of the pair is given.
  absl::Status Validate(const std::string& flag_prefix) const;
};

// Plaintext when `files` is empty; otherwise TLS (mutual with a CA). Errors
// name the file that could not be read (NotFound / PermissionDenied) or
// the flag that is missing (InvalidArgument).
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(const TlsFiles& files);
// Plaintext when `files` is empty; otherwise TLS verified against ca_file
// (the system roots when it is empty), presenting cert/key when given.
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> MakeChannelCredentials(const TlsFiles& files);

// The whole of a PEM file, or an error naming the path and the reason.
absl::StatusOr<std::string> ReadPemFile(const std::string& path);

}  // namespace ernie::services

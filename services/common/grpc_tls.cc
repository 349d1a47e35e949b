#include "services/common/grpc_tls.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/security/server_credentials.h"

namespace ernie::services {

absl::Status TlsFiles::Validate(const std::string& flag_prefix) const {
  if (cert_file.empty() != key_file.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(flag_prefix, "-cert and ", flag_prefix,
                                                   "-key must be given together"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadPemFile(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) {
    const int error = errno;
    const std::string reason = absl::StrCat("cannot read ", path, ": ", std::strerror(error));
    return error == EACCES ? absl::PermissionDeniedError(reason) : absl::NotFoundError(reason);
  }
  std::stringstream text;
  text << file.rdbuf();
  if (!absl::StrContains(text.str(), "-----BEGIN ")) {
    return absl::InvalidArgumentError(absl::StrCat(path, " is not a PEM file (no -----BEGIN line)"));
  }
  return text.str();
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(const TlsFiles& files) {
  if (!files.any()) return grpc::InsecureServerCredentials();
  if (files.cert_file.empty() || files.key_file.empty()) {
    return absl::InvalidArgumentError("TLS needs --tls-cert and --tls-key (--tls-ca alone is not enough)");
  }
  grpc::SslServerCredentialsOptions options(files.ca_file.empty()
                                                ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
                                                : GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  grpc::SslServerCredentialsOptions::PemKeyCertPair pair;
  absl::StatusOr<std::string> cert = ReadPemFile(files.cert_file);
  if (!cert.ok()) return cert.status();
  absl::StatusOr<std::string> key = ReadPemFile(files.key_file);
  if (!key.ok()) return key.status();
  pair.cert_chain = *std::move(cert);
  pair.private_key = *std::move(key);
  options.pem_key_cert_pairs.push_back(std::move(pair));
  if (!files.ca_file.empty()) {
    absl::StatusOr<std::string> ca = ReadPemFile(files.ca_file);
    if (!ca.ok()) return ca.status();
    options.pem_root_certs = *std::move(ca);
  }
  return grpc::SslServerCredentials(options);
}

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> MakeChannelCredentials(const TlsFiles& files) {
  if (!files.any()) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions options;
  if (!files.ca_file.empty()) {
    absl::StatusOr<std::string> ca = ReadPemFile(files.ca_file);
    if (!ca.ok()) return ca.status();
    options.pem_root_certs = *std::move(ca);
  }
  if (!files.cert_file.empty()) {
    absl::StatusOr<std::string> cert = ReadPemFile(files.cert_file);
    if (!cert.ok()) return cert.status();
    absl::StatusOr<std::string> key = ReadPemFile(files.key_file);
    if (!key.ok()) return key.status();
    options.pem_cert_chain = *std::move(cert);
    options.pem_private_key = *std::move(key);
  }
  return grpc::SslCredentials(options);
}

}  // namespace ernie::services

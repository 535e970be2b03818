#pragma once
// gRPC TLS credentials from PEM files: the one place the controller, the agent and the CLI
// turn their --tls-* options into credentials.
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/security/server_credentials.h"

namespace faultline {

struct ClientTlsFiles {
  std::string ca;    // empty: plaintext
  std::string cert;  // optional, with key: a client certificate (mutual TLS)
  std::string key;
};
// Insecure credentials when `ca` is empty; NOT_FOUND naming the file that cannot be read.
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> ClientCredentials(
    const ClientTlsFiles& files);

struct ServerTlsFiles {
  std::string cert;       // empty with key: plaintext
  std::string key;
  std::string client_ca;  // set: clients must present a certificate signed by it
};
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> ServerCredentials(
    const ServerTlsFiles& files);

}  // namespace faultline

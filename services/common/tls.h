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

// The gRPC target for a --controller value: one address as given (host:port; a DNS name
// with several A records is already several controllers), or several IP:port addresses
// separated by commas ("10.0.0.1:7000,10.0.0.2:7000"), which become one channel over all
// of them (an ipv4:/ipv6: target; gRPC's pick_first uses the first that answers and moves
// to the next when it goes away). INVALID_ARGUMENT naming the entry that is not IP:port.
absl::StatusOr<std::string> ControllerTarget(const std::string& controllers);

struct ServerTlsFiles {
  std::string cert;       // empty with key: plaintext
  std::string key;
  std::string client_ca;  // set: clients must present a certificate signed by it
};
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> ServerCredentials(
    const ServerTlsFiles& files);

}  // namespace faultline

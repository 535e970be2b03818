#pragma once
// gRPC TLS credentials from PEM files: the one place the controller, the agent and the CLI
// turn their --tls-* options into credentials.
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/support/channel_arguments.h"

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

// The name the controllers' TLS certificates are checked against: `server_name` when set
// (--tls-server-name); for a list of addresses the first one's host (gRPC would otherwise
// check the whole list, "10.0.0.1:7000,10.0.0.2:7000", and no certificate names that), so
// every controller's certificate must name it (one certificate for all replicas, or a
// shared name given as server_name); for one address "" (gRPC checks that address's host).
std::string TlsServerName(const std::string& controllers, const std::string& server_name);
// Sets TlsServerName on the channel (nothing when it is ""; ignored without TLS).
void SetTlsServerName(const std::string& controllers, const std::string& server_name,
                      grpc::ChannelArguments* args);

struct ServerTlsFiles {
  std::string cert;  // empty with key: plaintext
  std::string key;
  std::string client_ca;  // set: clients must present a certificate signed by it
};
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> ServerCredentials(
    const ServerTlsFiles& files);

}  // namespace faultline

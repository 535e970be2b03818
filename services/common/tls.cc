#include "services/common/tls.h"

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"

namespace faultline {
namespace {

absl::StatusOr<std::string> ReadPem(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> ClientCredentials(
    const ClientTlsFiles& files) {
  if (files.ca.empty()) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions ssl;
  for (auto [path, target] : {std::pair{&files.ca, &ssl.pem_root_certs},
                              std::pair{&files.cert, &ssl.pem_cert_chain},
                              std::pair{&files.key, &ssl.pem_private_key}}) {
    if (path->empty()) continue;
    auto pem = ReadPem(*path);
    if (!pem.ok()) return pem.status();
    *target = *std::move(pem);
  }
  return grpc::SslCredentials(ssl);
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> ServerCredentials(
    const ServerTlsFiles& files) {
  if (files.cert.empty() && files.key.empty()) return grpc::InsecureServerCredentials();
  auto cert = ReadPem(files.cert);
  if (!cert.ok()) return cert.status();
  auto key = ReadPem(files.key);
  if (!key.ok()) return key.status();
  grpc::SslServerCredentialsOptions ssl;
  ssl.pem_key_cert_pairs.push_back({*key, *cert});
  if (!files.client_ca.empty()) {
    auto ca = ReadPem(files.client_ca);
    if (!ca.ok()) return ca.status();
    ssl.pem_root_certs = *std::move(ca);
    ssl.client_certificate_request = GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
  }
  return grpc::SslServerCredentials(ssl);
}

}  // namespace faultline

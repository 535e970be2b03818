#include "common/tls.h"

#include <arpa/inet.h>

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/read_file.h"

namespace faultline {
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> ClientCredentials(
    const ClientTlsFiles& files) {
  if (files.ca.empty()) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions ssl;
  for (auto [path, target] :
       {std::pair{&files.ca, &ssl.pem_root_certs}, std::pair{&files.cert, &ssl.pem_cert_chain},
        std::pair{&files.key, &ssl.pem_private_key}}) {
    if (path->empty()) continue;
    auto pem = ReadFile(*path);
    if (!pem.ok()) return pem.status();
    *target = *std::move(pem);
  }
  return grpc::SslCredentials(ssl);
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> ServerCredentials(
    const ServerTlsFiles& files) {
  if (files.cert.empty() && files.key.empty()) return grpc::InsecureServerCredentials();
  auto cert = ReadFile(files.cert);
  if (!cert.ok()) return cert.status();
  auto key = ReadFile(files.key);
  if (!key.ok()) return key.status();
  grpc::SslServerCredentialsOptions ssl;
  ssl.pem_key_cert_pairs.push_back({*key, *cert});
  if (!files.client_ca.empty()) {
    auto ca = ReadFile(files.client_ca);
    if (!ca.ok()) return ca.status();
    ssl.pem_root_certs = *std::move(ca);
    ssl.client_certificate_request = GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
  }
  return grpc::SslServerCredentials(ssl);
}

absl::StatusOr<std::string> ControllerTarget(const std::string& controllers) {
  if (controllers.find(',') == std::string::npos) return controllers;
  std::vector<std::string> addresses;
  bool v4 = false;
  bool v6 = false;
  for (absl::string_view entry : absl::StrSplit(controllers, ',')) {
    entry = absl::StripAsciiWhitespace(entry);
    const auto bad = [&](absl::string_view why) {
      return absl::InvalidArgumentError(absl::StrCat(
          "controller: '", entry, "' ", why,
          " (a list of controllers is IP:port addresses separated by commas; for host names "
          "use one DNS name with several addresses)"));
    };
    const size_t colon = entry.rfind(':');
    if (colon == absl::string_view::npos || colon + 1 == entry.size()) return bad("has no port");
    absl::string_view host = entry.substr(0, colon);
    const absl::string_view port = entry.substr(colon + 1);
    if (port.find_first_not_of("0123456789") != absl::string_view::npos || port.size() > 5) {
      return bad("has no valid port");
    }
    unsigned char buf[16];
    if (absl::ConsumePrefix(&host, "[") && absl::ConsumeSuffix(&host, "]")) {
      if (inet_pton(AF_INET6, std::string(host).c_str(), buf) != 1) return bad("is not IPv6");
      v6 = true;
    } else if (inet_pton(AF_INET, std::string(host).c_str(), buf) == 1) {
      v4 = true;
    } else {
      return bad("is not an IP address");
    }
    addresses.emplace_back(entry);
  }
  if (v4 && v6) return absl::InvalidArgumentError("controller: mixes IPv4 and IPv6 addresses");
  return absl::StrCat(v6 ? "ipv6:" : "ipv4:", absl::StrJoin(addresses, ","));
}

std::string TlsServerName(const std::string& controllers, const std::string& server_name) {
  if (!server_name.empty()) return server_name;
  if (controllers.find(',') == std::string::npos) return "";
  absl::string_view first =
      absl::StripAsciiWhitespace(absl::string_view(controllers).substr(0, controllers.find(',')));
  first = first.substr(0, first.rfind(':'));
  absl::ConsumePrefix(&first, "[");
  absl::ConsumeSuffix(&first, "]");
  return std::string(first);
}

void SetTlsServerName(const std::string& controllers, const std::string& server_name,
                      grpc::ChannelArguments* args) {
  const std::string name = TlsServerName(controllers, server_name);
  if (!name.empty()) args->SetSslTargetNameOverride(name);
}

}  // namespace faultline

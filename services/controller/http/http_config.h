#pragma once
// --http-config FILE: protection for the HTTP endpoint the way Prometheus exporters do it,
// with the exporter-toolkit's web configuration file (the subset below; anything else in
// the file is refused, never silently ignored):
//
//   tls_server_config:
//     cert_file: server.pem            # PEM; relative paths are relative to the file
//     key_file: server.key
//     client_ca_file: ca.pem           # optional
//     client_auth_type: RequireAndVerifyClientCert   # or VerifyClientCertIfGiven, NoClientCert
//     min_version: TLS12               # or TLS13
//   basic_auth_users:                  # bcrypt hashes ($2a$, $2b$, $2y$)
//     prometheus: $2b$10$...
//
// TLS covers the whole port; basic auth covers /metrics (the probes /healthz and /readyz
// stay open, they tell nothing but up or down).
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_set>

#include "absl/status/statusor.h"
#include "services/controller/http/http_server.h"

namespace faultline::controller {

struct HttpWebConfig {
  std::string cert_file;
  std::string key_file;
  std::string client_ca_file;
  std::string client_auth_type = "NoClientCert";
  std::string min_version = "TLS12";
  std::map<std::string, std::string> basic_auth_users;  // user -> bcrypt hash
};

// Parses the YAML text; `dir` is where relative file names are taken from.
absl::StatusOr<HttpWebConfig> ParseHttpWebConfig(const std::string& text, const std::string& dir);
absl::StatusOr<HttpWebConfig> LoadHttpWebConfig(const std::string& path);

// Checks "Authorization: Basic ..." against bcrypt hashes. bcrypt is slow on purpose (~0.1 s
// at cost 10), so credentials that passed are remembered (by the SHA-256 of user, password
// and hash; at most 256) and later checks of them are instant. An unknown user costs a
// bcrypt too, so that timing does not tell which users exist. Thread-safe.
class BasicAuthChecker {
 public:
  explicit BasicAuthChecker(std::map<std::string, std::string> users);
  bool Check(const std::string& authorization);

 private:
  std::map<std::string, std::string> users_;
  std::mutex mu_;
  std::unordered_set<std::string> passed_;
};

// Sets the server's TLS files and, with users, its authenticator.
void ApplyHttpWebConfig(const HttpWebConfig& config, HttpServerOptions* options);

// bcrypt ($2b$) of a password, for basic_auth_users (`faultline-controller http-hash-password`).
absl::StatusOr<std::string> BcryptHash(const std::string& password, int cost = 10);
bool BcryptMatches(const std::string& password, const std::string& hash);

}  // namespace faultline::controller

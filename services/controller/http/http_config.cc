#include "services/controller/http/http_config.h"

#include <crypt.h>
#include <openssl/crypto.h>
#include <yaml-cpp/yaml.h>

#include <cstring>
#include <set>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/files.h"
#include "common/sha256.h"

namespace faultline::controller {
namespace {

absl::Status Bad(const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat("--http-config: ", what));
}

// Keys faultline does not serve are refused by name, never ignored: a config written for
// node_exporter that asks for more than this must not look protected when it is not.
absl::Status OnlyKeys(const YAML::Node& node, const std::string& where,
                      const std::set<std::string>& allowed) {
  if (!node.IsMap()) return Bad(absl::StrCat(where, " must be a mapping"));
  for (const auto& kv : node) {
    const std::string key = kv.first.Scalar();
    if (allowed.count(key) == 0) {
      return Bad(absl::StrCat(
          where, ": '", key, "' is not supported (supported: ", absl::StrJoin(allowed, ", "), ")"));
    }
  }
  return absl::OkStatus();
}

std::string Resolve(const std::string& dir, const std::string& file) {
  if (file.empty() || file.front() == '/' || dir.empty()) return file;
  return dir + "/" + file;
}

bool LooksBcrypt(const std::string& hash) {
  return hash.size() == 60 && (absl::StartsWith(hash, "$2a$") || absl::StartsWith(hash, "$2b$") ||
                               absl::StartsWith(hash, "$2y$"));
}

}  // namespace

absl::StatusOr<HttpWebConfig> ParseHttpWebConfig(const std::string& text, const std::string& dir) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return Bad(absl::StrCat("not YAML: ", e.what()));
  }
  HttpWebConfig config;
  if (!root || root.IsNull()) return config;  // an empty file: no TLS, no auth
  if (absl::Status s = OnlyKeys(root, "the file", {"tls_server_config", "basic_auth_users"});
      !s.ok()) {
    return s;
  }
  try {
    if (const YAML::Node tls = root["tls_server_config"]) {
      if (absl::Status s = OnlyKeys(
              tls, "tls_server_config",
              {"cert_file", "key_file", "client_ca_file", "client_auth_type", "min_version"});
          !s.ok()) {
        return s;
      }
      auto text_of = [&](const char* key) {
        return tls[key] ? tls[key].as<std::string>() : std::string();
      };
      config.cert_file = Resolve(dir, text_of("cert_file"));
      config.key_file = Resolve(dir, text_of("key_file"));
      config.client_ca_file = Resolve(dir, text_of("client_ca_file"));
      if (tls["client_auth_type"]) config.client_auth_type = text_of("client_auth_type");
      if (tls["min_version"]) config.min_version = text_of("min_version");
      if (config.cert_file.empty() || config.key_file.empty()) {
        return Bad("tls_server_config needs cert_file and key_file");
      }
      static const std::set<std::string> kAuthTypes = {"NoClientCert", "VerifyClientCertIfGiven",
                                                       "RequireAndVerifyClientCert"};
      if (kAuthTypes.count(config.client_auth_type) == 0) {
        return Bad(absl::StrCat("client_auth_type '", config.client_auth_type,
                                "' is not supported (supported: ", absl::StrJoin(kAuthTypes, ", "),
                                ")"));
      }
      if (config.client_auth_type != "NoClientCert" && config.client_ca_file.empty()) {
        return Bad(
            absl::StrCat("client_auth_type ", config.client_auth_type, " needs client_ca_file"));
      }
      if (config.client_auth_type == "NoClientCert" && !config.client_ca_file.empty()) {
        config.client_auth_type = "RequireAndVerifyClientCert";  // the toolkit's default with a CA
      }
      if (config.min_version != "TLS12" && config.min_version != "TLS13") {
        return Bad(absl::StrCat("min_version '", config.min_version, "': TLS12 or TLS13"));
      }
    }
    if (const YAML::Node users = root["basic_auth_users"]) {
      if (!users.IsMap()) return Bad("basic_auth_users must be a mapping of user to bcrypt hash");
      for (const auto& kv : users) {
        const std::string user = kv.first.Scalar();
        const std::string hash = kv.second.IsScalar() ? kv.second.Scalar() : std::string();
        if (user.empty() || user.find(':') != std::string::npos) {
          return Bad(absl::StrCat("basic_auth_users: bad user name '", user, "'"));
        }
        if (!LooksBcrypt(hash)) {
          return Bad(absl::StrCat("basic_auth_users: the password of '", user,
                                  "' is not a bcrypt hash ($2a$/$2b$/$2y$, 60 characters; "
                                  "faultline-controller http-hash-password makes one)"));
        }
        config.basic_auth_users[user] = hash;
      }
    }
  } catch (const YAML::Exception& e) {
    return Bad(e.what());
  }
  return config;
}

absl::StatusOr<HttpWebConfig> LoadHttpWebConfig(const std::string& path) {
  std::string error;
  std::optional<std::string> text = ReadFileToString(path, &error);
  if (!text.has_value()) return absl::NotFoundError("--http-config: cannot read " + error);
  auto slash = path.rfind('/');
  return ParseHttpWebConfig(*text, slash == std::string::npos ? "." : path.substr(0, slash));
}

BasicAuthChecker::BasicAuthChecker(std::map<std::string, std::string> users)
    : users_(std::move(users)) {}

bool BasicAuthChecker::Check(const std::string& authorization) {
  // "Basic" (any case), then base64 of "user:password".
  constexpr std::string_view kScheme = "basic ";
  if (authorization.size() <= kScheme.size() ||
      absl::AsciiStrToLower(authorization.substr(0, kScheme.size())) != kScheme) {
    return false;
  }
  std::string decoded;
  if (!absl::Base64Unescape(absl::StripAsciiWhitespace(authorization.substr(kScheme.size())),
                            &decoded)) {
    return false;
  }
  auto colon = decoded.find(':');
  if (colon == std::string::npos) return false;
  const std::string user = decoded.substr(0, colon);
  const std::string password = decoded.substr(colon + 1);
  auto it = users_.find(user);
  if (it == users_.end()) {
    // As slow as a real check, so that the answer's timing does not tell users apart.
    static const std::string dummy = BcryptHash("not a user").value_or("");
    BcryptMatches(password, dummy);
    return false;
  }
  const std::string key = Sha256Digest(
      absl::StrCat(user, std::string(1, '\0'), password, std::string(1, '\0'), it->second));
  {
    std::lock_guard lock(mu_);
    if (passed_.count(key) != 0) return true;
  }
  if (!BcryptMatches(password, it->second)) return false;
  std::lock_guard lock(mu_);
  if (passed_.size() >= 256) passed_.clear();
  passed_.insert(key);
  return true;
}

void ApplyHttpWebConfig(const HttpWebConfig& config, HttpServerOptions* options) {
  options->tls_cert_file = config.cert_file;
  options->tls_key_file = config.key_file;
  options->tls_client_ca_file = config.client_ca_file;
  options->tls_require_client_cert = config.client_auth_type == "RequireAndVerifyClientCert";
  options->tls13_only = config.min_version == "TLS13";
  if (!config.basic_auth_users.empty()) {
    auto checker = std::make_shared<BasicAuthChecker>(config.basic_auth_users);
    options->authenticator = [checker](const std::string& authorization) {
      return checker->Check(authorization);
    };
  }
}

absl::StatusOr<std::string> BcryptHash(const std::string& password, int cost) {
  char setting[CRYPT_GENSALT_OUTPUT_SIZE];
  if (crypt_gensalt_rn("$2b$", static_cast<unsigned long>(cost), nullptr, 0, setting,
                       sizeof setting) == nullptr) {
    return absl::InternalError("crypt_gensalt: no bcrypt in this libcrypt");
  }
  crypt_data data;
  std::memset(&data, 0, sizeof data);
  const char* hash = crypt_rn(password.c_str(), setting, &data, sizeof data);
  if (hash == nullptr || hash[0] == '*') return absl::InternalError("crypt: bcrypt failed");
  return std::string(hash);
}

bool BcryptMatches(const std::string& password, const std::string& hash) {
  if (password.find('\0') != std::string::npos) return false;  // crypt takes C strings
  crypt_data data;
  std::memset(&data, 0, sizeof data);
  const char* out = crypt_rn(password.c_str(), hash.c_str(), &data, sizeof data);
  if (out == nullptr || out[0] == '*' || std::strlen(out) != hash.size()) return false;
  return CRYPTO_memcmp(out, hash.data(), hash.size()) == 0;
}

}  // namespace faultline::controller

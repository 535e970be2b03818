#include "services/controller/api/auth.h"

#include <openssl/evp.h>

#include <cctype>
#include <cstdio>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "common/sha256.h"
#include "services/controller/convert/convert.h"

namespace faultline::controller {

std::string NewToken() {
  unsigned char bytes[32];
  std::ifstream random("/dev/urandom", std::ios::binary);
  random.read(reinterpret_cast<char*>(bytes), sizeof(bytes));
  if (random.gcount() != static_cast<std::streamsize>(sizeof(bytes))) return "";
  return "flt_" + LowerHex(std::string_view(reinterpret_cast<const char*>(bytes), sizeof(bytes)));
}

std::optional<std::string> BearerToken(const std::string& authorization) {
  // The scheme is case-insensitive (RFC 9110); the token is not.
  static const std::string kScheme = "bearer ";
  if (authorization.size() <= kScheme.size()) return std::nullopt;
  for (size_t i = 0; i < kScheme.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(authorization[i])) != kScheme[i])
      return std::nullopt;
  }
  std::string token = authorization.substr(kScheme.size());
  if (token.size() > 256) return std::nullopt;
  return token;
}

absl::StatusOr<TokenRecord> Authorizer::Identify(const grpc::ServerContextBase* ctx) {
  const auto& metadata = ctx->client_metadata();
  auto it = metadata.find("authorization");
  if (it == metadata.end()) {
    return absl::UnauthenticatedError("missing credentials: send 'authorization: Bearer TOKEN'");
  }
  auto token = BearerToken(std::string(it->second.data(), it->second.size()));
  if (!token) return absl::UnauthenticatedError("authorization: expected 'Bearer TOKEN'");
  const std::string hash = Sha256Hex(*token);
  const auto now = clock_->Now();
  {
    std::lock_guard lock(mu_);
    auto hit = cache_.find(hash);
    if (hit != cache_.end() && hit->second.second > now) return hit->second.first;
  }
  auto found = store_->FindToken(hash);
  if (!found.ok()) return found.status();  // UNAVAILABLE while the database is down
  if (!found->has_value()) return absl::UnauthenticatedError("unknown or revoked token");
  std::lock_guard lock(mu_);
  if (cache_.size() > 10000) cache_.clear();
  cache_[hash] = {**found, now + kCacheFor};
  return **found;
}

grpc::Status Authorizer::RequireUser(const grpc::ServerContextBase* ctx) {
  if (!required_) return grpc::Status::OK;
  auto who = Identify(ctx);
  if (!who.ok()) return ToGrpc(who.status());
  if (who->role != TokenRole::kUser) {
    return grpc::Status(
        grpc::StatusCode::PERMISSION_DENIED,
        absl::StrCat("token '", who->name, "' is an agent token: JobService needs a user token"));
  }
  return grpc::Status::OK;
}

grpc::Status Authorizer::RequireAgent(const grpc::ServerContextBase* ctx,
                                      const std::string& board) {
  return CheckAgent(ctx, &board);
}

grpc::Status Authorizer::RequireAnyAgent(const grpc::ServerContextBase* ctx) {
  return CheckAgent(ctx, nullptr);
}

grpc::Status Authorizer::CheckAgent(const grpc::ServerContextBase* ctx, const std::string* board) {
  if (!required_) return grpc::Status::OK;
  auto who = Identify(ctx);
  if (!who.ok()) return ToGrpc(who.status());
  if (who->role != TokenRole::kAgent) {
    return grpc::Status(
        grpc::StatusCode::PERMISSION_DENIED,
        absl::StrCat("token '", who->name, "' is a user token: AgentService needs an agent token"));
  }
  if (board != nullptr && who->board != *board) {
    return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                        absl::StrCat("token '", who->name, "' acts for board '", who->board,
                                     "', not '", board->substr(0, 128), "'"));
  }
  return grpc::Status::OK;
}

}  // namespace faultline::controller

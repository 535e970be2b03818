#pragma once
// Who may call what. Users and agents hold different bearer tokens (`authorization:
// Bearer flt_…` metadata); only their SHA-256 is stored (api_tokens). gRPC 1.51's
// AuthMetadataProcessor needs TLS, so the handlers check tokens themselves, in plaintext
// and TLS alike:
//   JobService   user tokens only;
//   AgentService agent tokens only, and only for the board the token belongs to (every
//                agent write is further fenced by run, attempt and board in the store).
// Unknown or revoked tokens, or none: UNAUTHENTICATED. The other role or another board:
// PERMISSION_DENIED. With auth off every call is let through (local stacks, tests).
#include <chrono>
#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "common/sha256.h"
#include "grpcpp/grpcpp.h"
#include "services/controller/core/clock.h"
#include "services/controller/storage/interfaces.h"

namespace faultline::controller {

// "flt_" + 64 hex digits from the kernel's CSPRNG.
std::string NewToken();
// The token of an "authorization: Bearer TOKEN" value, or nullopt.
std::optional<std::string> BearerToken(const std::string& authorization);

class Authorizer {
 public:
  // `store` may be null only with required == false.
  Authorizer(TokenStore* store, bool required, const Clock* clock = SystemClock::Get())
      : store_(store), required_(required), clock_(clock) {}

  grpc::Status RequireUser(const grpc::ServerContextBase* ctx);
  grpc::Status RequireAgent(const grpc::ServerContextBase* ctx, const std::string& board);
  // Any agent token (builders fetch, upload and finish builds fenced by attempt ids).
  grpc::Status RequireAnyAgent(const grpc::ServerContextBase* ctx);
  bool required() const { return required_; }

 private:
  absl::StatusOr<TokenRecord> Identify(const grpc::ServerContextBase* ctx);
  // An agent token; with `board`, one that acts for that board.
  grpc::Status CheckAgent(const grpc::ServerContextBase* ctx, const std::string* board);

  TokenStore* store_;
  bool required_;
  const Clock* clock_;
  // Known tokens for a short while: heartbeats do not each cost a query. A revocation
  // takes effect within kCacheFor.
  static constexpr std::chrono::seconds kCacheFor{10};
  std::mutex mu_;
  std::map<std::string, std::pair<TokenRecord, std::chrono::system_clock::time_point>> cache_;
};

}  // namespace faultline::controller

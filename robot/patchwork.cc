#include "robot/patchwork.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "common/http_client.h"
#include "nlohmann/json.hpp"

namespace faultline::robot {
namespace {

std::string Base(const std::string& url) {
  return std::string(absl::StripSuffix(url, "/")) + "/api/1.2";
}

// A refusal of this request (4xx) is FAILED_PRECONDITION; patchwork failing (5xx) is
// UNAVAILABLE, as a connection that fails is.
absl::Status HttpError(int status, absl::string_view message) {
  return status >= 400 && status < 500 ? absl::FailedPreconditionError(message)
                                       : absl::UnavailableError(message);
}

}  // namespace

absl::StatusOr<std::vector<int64_t>> Patchwork::PatchIds(const std::string& message_id) const {
  http_client::Request request;
  request.url = absl::StrCat(
      Base(url_), "/patches/?msgid=", http_client::UriEncode(message_id, /*keep_slash=*/false));
  request.headers = {{"Accept", "application/json"}};
  request.timeout_seconds = kTimeoutSeconds;
  absl::StatusOr<http_client::Response> response = http_client::Send(request);
  if (!response.ok()) return response.status();
  if (response->status != 200) {
    return HttpError(response->status,
                     absl::StrCat("patchwork: GET ", request.url, ": HTTP ", response->status));
  }
  const nlohmann::json list = nlohmann::json::parse(response->body, nullptr, false);
  if (!list.is_array()) {
    return absl::DataLossError(absl::StrCat("patchwork: GET ", request.url, ": not a list"));
  }
  std::vector<int64_t> ids;
  for (const auto& patch : list) {
    if (patch.is_object() && patch.contains("id") && patch["id"].is_number_integer()) {
      ids.push_back(patch["id"].get<int64_t>());
    }
  }
  return ids;
}

absl::Status Patchwork::PostCheck(int64_t patch_id, const PatchworkCheck& check) const {
  http_client::Request request;
  request.method = "POST";
  request.url = absl::StrCat(Base(url_), "/patches/", patch_id, "/checks/");
  request.headers = {{"Content-Type", "application/json"},
                     {"Accept", "application/json"},
                     {"Authorization", "Token " + token_}};
  nlohmann::json body = {
      {"state", check.state}, {"context", check.context}, {"description", check.description}};
  if (!check.target_url.empty()) body["target_url"] = check.target_url;
  request.body = body.dump();
  request.timeout_seconds = kTimeoutSeconds;
  absl::StatusOr<http_client::Response> response = http_client::Send(request);
  if (!response.ok()) return response.status();
  if (response->status != 201 && response->status != 200) {
    return HttpError(response->status,
                     absl::StrCat("patchwork: POST ", request.url, ": HTTP ", response->status, " ",
                                  response->body.substr(0, 200)));
  }
  return absl::OkStatus();
}

}  // namespace faultline::robot

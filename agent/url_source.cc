#include "agent/url_source.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/http_client.h"

namespace faultline::agent {

absl::Status UrlSource::Read(const std::string& sha256, uint64_t offset,
                             const std::function<absl::Status(absl::string_view)>& sink) {
  (void)sha256;  // the URL names the object; the cache checks the bytes against sha256
  const std::string where = url_.substr(0, url_.find('?'));  // not the signature
  http_client::Request request;
  request.url = url_;
  request.timeout_seconds = timeout_seconds_;
  request.ca_file = ca_file_;
  if (offset > 0) request.headers = {{"Range", absl::StrCat("bytes=", offset, "-")}};
  uint64_t skip = 0;
  auto on_head = [&](const http_client::Response& head) -> absl::Status {
    if (head.status == 200 && offset > 0) skip = offset;  // the range was ignored
    if (head.status == 206) {
      auto range = head.headers.find("content-range");
      if (range == head.headers.end() ||
          !absl::StartsWith(range->second, absl::StrCat("bytes ", offset, "-"))) {
        return absl::DataLossError(
            absl::StrCat("GET ", where, ": asked from byte ", offset, ", got Content-Range '",
                         range == head.headers.end() ? "" : range->second, "'"));
      }
    }
    return absl::OkStatus();
  };
  absl::StatusOr<http_client::Response> got = http_client::Send(
      request,
      [&](absl::string_view data) -> absl::Status {
        if (skip > 0) {
          const uint64_t n = std::min<uint64_t>(skip, data.size());
          data.remove_prefix(n);
          skip -= n;
          if (data.empty()) return absl::OkStatus();
        }
        return sink(data);
      },
      on_head);
  if (!got.ok()) return got.status();
  if (got->status == 404) return absl::NotFoundError(absl::StrCat("GET ", where, ": HTTP 404"));
  if (got->status / 100 != 2) {
    return absl::UnavailableError(
        absl::StrCat("GET ", where, ": HTTP ", got->status,
                     got->status == 403 ? " (the URL expired or its signature is refused)" : ""));
  }
  return absl::OkStatus();
}

}  // namespace faultline::agent

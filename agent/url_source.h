#pragma once
// An artifact fetched by URL (an object store's presigned GET), resumed with a Range
// request: the board needs no credentials, and ArtifactCache verifies every byte by sha256
// as it does for images streamed from the controller.
#include <string>

#include "agent/artifact_cache.h"

namespace faultline::agent {

class UrlSource : public ArtifactSource {
 public:
  // `ca_file`: CA certificates for https (empty: the system's).
  explicit UrlSource(std::string url, std::string ca_file = "", int timeout_seconds = 60)
      : url_(std::move(url)), ca_file_(std::move(ca_file)), timeout_seconds_(timeout_seconds) {}
  // GET from `offset` (Range: bytes=OFFSET-; a server that ignores the range and answers
  // 200 has the first OFFSET bytes skipped). A non-2xx answer is UNAVAILABLE naming the
  // status (403: the URL expired or its signature is refused), except 404: NOT_FOUND.
  absl::Status Read(const std::string& sha256, uint64_t offset,
                    const std::function<absl::Status(absl::string_view)>& sink) override;

 private:
  std::string url_;
  std::string ca_file_;
  int timeout_seconds_;
};

}  // namespace faultline::agent

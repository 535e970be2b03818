#pragma once
// Patchwork's REST API (https://patchwork.readthedocs.io/en/latest/api/rest/), the part the
// robot uses: the patches of a mail by its Message-ID, and a check on each one, which
// patchwork shows beside the patch (pending while the jobs run, then the verdict).
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace faultline::robot {

struct PatchworkCheck {
  std::string state;    // pending | success | warning | fail
  std::string context;  // "faultline" (one check per context is shown, the newest)
  std::string description;
  std::string target_url;  // "" : none
};

class Patchwork {
 public:
  // `url`: the instance ("https://patchwork.kernel.org"); `token`: an API token that may
  // post checks.
  Patchwork(std::string url, std::string token) : url_(std::move(url)), token_(std::move(token)) {}

  // Errors: FAILED_PRECONDITION when patchwork refused the request (4xx: a token it does
  // not take, a patch it does not know); UNAVAILABLE when it could not be reached, did not
  // answer within kTimeoutSeconds or failed (5xx): the next request would fare the same.
  static constexpr int kTimeoutSeconds = 30;

  // GET /api/1.2/patches/?msgid=<id>: the ids of the patches of that mail (none for a
  // cover letter or a mail patchwork did not take).
  absl::StatusOr<std::vector<int64_t>> PatchIds(const std::string& message_id) const;
  // POST /api/1.2/patches/<id>/checks/.
  absl::Status PostCheck(int64_t patch_id, const PatchworkCheck& check) const;

 private:
  std::string url_;
  std::string token_;
};

}  // namespace faultline::robot

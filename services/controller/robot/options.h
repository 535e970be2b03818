#pragma once
// What the series robot is told (robot.yaml, faultline.v1.RobotConfig) and what one pass did.
// Shared by the robot's rooms: intake (archive -> stored, assembled series), jobs (plan,
// submit, measured), outbox (replies, patchwork checks, culprit mails) and the change-point
// bisector, its own duty.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "faultline/v1/job.pb.h"
#include "robot/choose.h"  // ChooseRules
#include "services/controller/core/clock.h"

namespace faultline::controller {

// How the robot answers (robot.yaml's replies): no `from`, no replies.
struct RobotReplyOptions {
  std::string from;         // "faultline robot <robot@example.org>"
  std::string smtp;         // host:port
  std::string dry_run_dir;  // instead of smtp: each mail written as <Message-ID>.eml
  uint32_t per_hour = 10;
  std::vector<std::string> cc;
  std::string patchwork;        // patchwork's URL: a check on each patch ("": none)
  std::string patchwork_token;  // read from patchwork_token_file
  bool culprits = false;        // mail the confirmed culprits of change-point bisections
};

struct RobotOptions {
  std::string archive;  // a public-inbox v2 inbox directory
  robot::ChooseRules rules;
  std::string tree;    // the kernel tree on the builders (absolute path)
  std::string branch;  // the base of a series without base-commit: (a ref of `tree`)
  std::string config_base = "tinyconfig";
  std::vector<v1::SourceFile> fragments;  // config fragments for every kernel
  std::vector<std::string> include;       // a series' paths applied (empty: all)
  // What each chosen series runs: job specs without kernels (the robot sets them), e.g.
  // the seeds' studies.
  std::vector<v1::JobSpec> studies;
  std::vector<std::string> arches;  // empty: every arch with a board that boots built kernels
  // Bounds on what a stranger's mail can make the robot do (robot.yaml's limits): a mail
  // larger (not even read), a series of more patches, or a series whose mbox is larger is
  // skipped (kept as bytes, or its place in the archive, its reason in /metrics) and every
  // other series still gets its answer. A pass reads at most mails_per_pass mails and
  // max_pass_bytes bytes (a few git processes per epoch) and submits at most
  // series_per_pass series; the rest waits for the next pass.
  size_t mails_per_pass = 500;
  size_t max_pass_bytes = 64u << 20;
  size_t max_mail_bytes = 8u << 20;
  int max_patches = 100;
  size_t max_series_bytes = 16u << 20;
  int series_per_pass = 20;
  // A pass sends replies and posts checks for at most this long (each SMTP or patchwork
  // call has its own timeout); what is left goes in the next pass.
  uint32_t pass_seconds = 120;
  uint32_t poll_seconds = 60;  // between two passes
  // The nightly side: a change point toward slower on a kernel built from `tree` starts a
  // bisection (request id per change point; `tree` read where the controller runs). The
  // change-point bisector (robot/change_points.h) is a duty of its own.
  bool bisect_changes = false;
  RobotReplyOptions replies;
};

// Reads robot.yaml (faultline.v1.RobotConfig, by spec/'s YAML loader) into the options: the
// studies' spec files (kernels are the robot's to set: a study that names some is refused)
// and the fragments read; each error names the file, the field and what is wrong.
absl::StatusOr<RobotOptions> LoadRobotConfig(const std::string& path);

struct RobotPass {
  int mails = 0;    // read from the archive
  int kept = 0;     // patch mails among them
  int decided = 0;  // series decided this pass (chosen or skipped)
  int chosen = 0;
  int submitted = 0;  // series whose jobs were submitted
  int measured = 0;   // series whose jobs all ended
  int replied = 0;    // replies sent (or written, dry run)
  int checks = 0;     // patchwork checks posted
  int skipped = 0;    // mails skipped (unreadable, too large, too many patches)
  int errors = 0;     // series whose step failed this pass (logged; the others went on)
};

// The end of a pass's network I/O (SMTP, patchwork): past it, the rest waits for the next
// pass, so a slow server costs one pass its tail, never the robot its answers.
class PassDeadline {
 public:
  PassDeadline(const Clock* clock, uint32_t seconds)
      : clock_(clock), end_ms_(NowMs(clock) + int64_t{seconds} * 1000), seconds_(seconds) {}
  // Past it (logged for `step`).
  bool Past(const char* step) const;
  static int64_t NowMs(const Clock* clock) {
    return clock != nullptr ? clock->NowMs() : SystemClock::Get()->NowMs();
  }

 private:
  const Clock* clock_;
  int64_t end_ms_;
  uint32_t seconds_;
};

}  // namespace faultline::controller

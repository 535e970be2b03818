#pragma once
// The series robot (issue #45): every pass reads the list archive on from where it was,
// keeps the patch mails, gathers each posted series (robot/series.h), decides it once
// (robot/choose.h: whole, and touching mm or opted in), and for a chosen one submits its
// A/B jobs: for every study the config names and every arch with boards that boot built
// kernels, the base (the series' base-commit:, else the config's branch) against base +
// series, and against the earlier version too when that one was tested. Submissions carry
// a request id per (series, study, arch): a pass cut short by a crash submits nothing twice.
// Replies (mail, patchwork checks) follow in a later pass once every job is final.
#include <cstddef>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "faultline/v1/job.pb.h"
#include "robot/choose.h"  // ChooseRules
#include "robot/mail.h"
#include "robot/reply.h"
#include "robot/series.h"
#include "services/controller/core/clock.h"
#include "services/controller/storage/interfaces.h"

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
  // bisection (request id per change point; `tree` read where the controller runs).
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
  int submitted = 0;   // series whose jobs were submitted
  int measured = 0;    // series whose jobs all ended
  int replied = 0;     // replies sent (or written, dry run)
  int checks = 0;      // patchwork checks posted
  int bisections = 0;  // bisections started from change points
  int skipped = 0;     // mails skipped (unreadable, too large, too many patches)
  int errors = 0;      // series whose step failed this pass (logged; the others went on)
};

class SeriesRobot {
 public:
  SeriesRobot(const Stores& stores, RobotOptions options, const Clock* clock = nullptr)
      : stores_(stores), options_(std::move(options)), clock_(clock) {}

  absl::StatusOr<RobotPass> RunOnce();

  // The job specs for one series (exposed for tests): per study and arch, the base and the
  // series (and the earlier version when `previous_mbox` is not empty).
  struct PlannedJob {
    std::string request_id;
    v1::JobSpec spec;
  };
  std::vector<PlannedJob> PlanJobs(const SeriesRecord& series, const std::string& mbox,
                                   const SeriesRecord* previous, const std::string& previous_mbox,
                                   const std::vector<std::string>& arches) const;

 private:
  // What a series' reply and final check say: the check's state (success | warning | fail)
  // and one-line description, and the reply's first lines.
  struct Verdict {
    std::string state, description;
    std::string headline;            // "Regression: 1 of 4 comparisons say slower (95% CI):"
    std::vector<std::string> lines;  // one per regressing comparison
  };

  // Past this pass's deadline for network I/O (logged once per pass and step).
  bool PastDeadline(const char* step);

  absl::StatusOr<robot::Series> LoadSeries(const std::string& root, int version,
                                           const std::string& id) const;
  absl::Status Ingest(RobotPass& pass, std::vector<std::pair<std::string, int>>& touched);
  absl::Status Decide(const std::string& root, int version, RobotPass& pass);
  absl::Status Submit(SeriesRecord series, RobotPass& pass);
  absl::Status CheckMeasured(SeriesRecord series, RobotPass& pass);
  absl::StatusOr<std::vector<std::string>> Arches() const;
  absl::Status SettleInterruptedReplies();
  absl::Status NoteArchived(const robot::Mail& mail);
  absl::Status QueueReply(const SeriesRecord& series);
  // The mails to the authors of confirmed culprits of bisections started from a change
  // point, queued once each (the outbox's key: "bisection/<id>", "culprit").
  absl::Status QueueCulpritMails();
  absl::Status SendQueuedReplies(RobotPass& pass);
  // The nightly side: every open change point toward slower on a kernel built from the
  // robot's tree starts its bisection, once (request id "robot-change-<id>"); one that
  // cannot be bisected (same commit on both sides, no finished build) is logged once.
  absl::Status BisectChangePoints(RobotPass& pass);
  absl::StatusOr<std::string> ReplyBody(const SeriesRecord& series, const Verdict& verdict) const;
  // The reply to a series that does not apply (series.reason: the build's error): the patch,
  // the file and the hunk, quoted from the patch.
  std::string ApplyFailureBody(const SeriesRecord& series, const robot::Series& mails) const;
  // A series whose build says it does not apply: its jobs cancelled, answered once.
  absl::Status DoesNotApply(SeriesRecord series, const std::string& error, RobotPass& pass);
  absl::Status Deliver(const ReplyRecord& reply, bool* maybe_delivered) const;
  // Queues the check `kind` (pending | verdict) for every patch of the series: patchwork
  // shows the newest check of a context, the verdict replaces the pending one.
  absl::Status QueueChecks(const SeriesRecord& series, const std::string& kind,
                           const std::string& state, const std::string& description) const;
  // Posts the due checks; one patchwork refuses is tried again later, up to 8 times.
  absl::Status PostDueChecks(RobotPass& pass);
  // The final check: fail when no job measured anything, warning when a comparison says
  // regression, success otherwise.
  Verdict Judge(const SeriesRecord& series) const;
  int64_t NowMs() const;
  // From, Cc and Date of the robot's mails (now).
  robot::ReplyOptions MailOptions() const;

  Stores stores_;
  int64_t pass_deadline_ms_ = 0;  // RunOnce: network I/O stops after it
  RobotOptions options_;
  const Clock* clock_;                    // null: the system's
  std::set<int64_t> change_points_done_;  // started or refused, this process
};

}  // namespace faultline::controller

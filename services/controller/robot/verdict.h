#pragma once
// What the robot says about a series: the verdict its reply opens with and its final
// patchwork check carries, and the reply's text (results, or why the series does not apply).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "robot/series.h"
#include "services/controller/robot/options.h"
#include "services/controller/storage/interfaces.h"

namespace faultline::controller {

struct SeriesVerdict {
  CheckState state = CheckState::kSuccess;  // the check's: success | warning | fail
  std::string description;                  // the check's one line
  std::string headline;                     // "Regression: 1 of 4 comparisons say slower (95% CI):"
  std::vector<std::string> lines;           // one per regressing comparison (or failed build)
};

// fail when a kernel did not build (and nothing regressed) or no job measured anything,
// warning when a comparison says regression, success otherwise.
SeriesVerdict JudgeSeries(const Stores& stores, const SeriesRecord& series);

// The reply to a measured series: the verdict, how it was measured, every job's report,
// and where the time went (TimingParagraph).
absl::StatusOr<std::string> ResultsBody(const Stores& stores, const RobotOptions& options,
                                        const SeriesRecord& series, const SeriesVerdict& verdict,
                                        int64_t posted_ms, int64_t now_ms);

// Where the time went, for a reply: from the series' posting (`posted_ms`, its mail's Date;
// left out unless it is within the 30 days before `now_ms`) to now, and each job's phases per arch
// (core/phases.h).
absl::StatusOr<std::string> TimingParagraph(const Stores& stores, const SeriesRecord& series,
                                            int64_t posted_ms, int64_t now_ms);

// Which patch of this version of the series did not apply, from its jobs' failed builds:
// the failure the build carries (for a build stored before builds carried it, read from its
// error's words), and that error. nullopt: none of its builds says so.
struct SeriesApplyFailure {
  ApplyFailureRecord failure;
  std::string error;
};
absl::StatusOr<std::optional<SeriesApplyFailure>> FindApplyFailure(const Stores& stores,
                                                                   const SeriesRecord& series);

// The reply to a series that does not apply: the patch, the file and the hunk, quoted from
// the patch (`failure` null: series.reason, the build's error, as it is).
std::string ApplyFailureBody(const RobotOptions& options, const SeriesRecord& series,
                             const ApplyFailureRecord* failure, const robot::Series& mails);

// The signature every mail of the robot ends with.
extern const char* const kRobotSignature;

}  // namespace faultline::controller

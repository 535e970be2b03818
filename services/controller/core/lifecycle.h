#pragma once
// The run lifecycle's rules, in one place and free of storage: the states of jobs, runs,
// change points and tokens; what happens to an attempt that was lost; what a result must
// look like; which cells of an adaptive job get another block of pairs. The stores apply
// these rules (PostgreSQL and the in-memory fakes alike).
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "services/controller/core/domain.h"
#include "stats/statistics.h"

namespace faultline::controller {

enum class JobState { kQueued, kRunning, kSucceeded, kFailed, kCancelled };
enum class RunState { kQueued, kAssigned, kRunning, kSucceeded, kFailed, kCancelled };
enum class ChangePointState { kOpen, kAcknowledged, kFixed, kInvalid };
enum class TokenRole { kUser, kAgent };
// A kernel build (storage: builds.state) and a bisection (bisections.state).
enum class BuildState { kQueued, kBuilding, kDone, kFailed };
enum class BisectionState { kRunning, kDone, kFailed, kCancelled };
// A whole posted series as the robot decided it (storage: robot_series.state): outside what
// it tests, chosen, its jobs submitted, measured (every job final), answered, or failed
// (its jobs could not be submitted); or it does not apply to its base (its jobs cancelled,
// answered with the failing hunk: then replied).
enum class SeriesState {
  kSkipped,
  kChosen,
  kSubmitted,
  kMeasured,
  kReplied,
  kFailed,
  kDoesNotApply
};
// The robot's reply, from queued to sent (storage: robot_replies.state). "sending" is written
// before the mail goes out and "sent" after: one found "sending" by a later pass went out or
// not (the controller died between the two) and becomes "uncertain", never sent again; its
// Message-ID turning up in the archive makes it "sent".
enum class ReplyState { kQueued, kSending, kSent, kUncertain };
// A patchwork check in the robot's outbox (storage: robot_checks.status): queued until
// patchwork took it (posted); a pending check still queued when the verdict comes is
// superseded; one patchwork refused too long is failed.
enum class CheckStatus { kQueued, kPosted, kSuperseded, kFailed };
// Which mail of the robot (storage: robot_replies.kind): a series' results, its "does not
// apply", or the mail to a confirmed culprit's author. One of each per series (or bisection).
enum class ReplyKind { kResults, kApply, kCulprit };
// Which check (storage: robot_checks.kind): pending while a series' jobs run, then the
// verdict; one of each per patch, ever.
enum class CheckKind { kPending, kVerdict };
// What a check says (storage: robot_checks.state; patchwork's vocabulary): pending while the
// jobs run; the verdict success, warning (something regressed) or fail (nothing measured,
// a kernel did not build, the series does not apply).
enum class CheckState { kPending, kSuccess, kWarning, kFail };

// The stored spelling ("queued", "needs-check", ...); Parse* returns nullopt for others.
std::string_view ToString(JobState s);
std::string_view ToString(RunState s);
std::string_view ToString(ChangePointState s);
std::string_view ToString(TokenRole r);
std::string_view ToString(BoardHealth h);     // ok | switching | needs-check
std::string_view ToString(BuildState s);      // queued | building | done | failed
std::string_view ToString(BisectionState s);  // running | done | failed | cancelled
std::string_view ToString(SeriesState s);     // skipped | chosen | ... | does_not_apply
std::string_view ToString(ReplyState s);      // queued | sending | sent | uncertain
std::string_view ToString(CheckStatus s);     // queued | posted | superseded | failed
std::string_view ToString(ReplyKind k);       // results | apply | culprit
std::string_view ToString(CheckKind k);       // pending | verdict
std::string_view ToString(CheckState s);      // pending | success | warning | fail
std::optional<JobState> ParseJobState(std::string_view s);
std::optional<RunState> ParseRunState(std::string_view s);
std::optional<ChangePointState> ParseChangePointState(std::string_view s);
std::optional<TokenRole> ParseTokenRole(std::string_view s);
std::optional<BoardHealth> ParseBoardHealth(std::string_view s);
std::optional<BuildState> ParseBuildState(std::string_view s);
std::optional<BisectionState> ParseBisectionState(std::string_view s);
std::optional<SeriesState> ParseSeriesState(std::string_view s);
std::optional<ReplyState> ParseReplyState(std::string_view s);
std::optional<CheckStatus> ParseCheckStatus(std::string_view s);
std::optional<ReplyKind> ParseReplyKind(std::string_view s);
std::optional<CheckKind> ParseCheckKind(std::string_view s);
std::optional<CheckState> ParseCheckState(std::string_view s);

bool IsFinal(JobState s);  // succeeded, failed or cancelled
bool IsFinal(RunState s);
bool IsOpen(RunState s);  // queued, assigned or running

// A job's state from its runs' counts (a cancelled job stays cancelled).
JobState JobStateFromRuns(int open, int started, int failed);

// An attempt whose lease lapsed or whose agent restarted mid-run.
struct RequeuePolicy {
  int max_attempts = 3;
  double backoff_seconds = 30;       // before attempt n+1: backoff · 2^(n−1), capped,
  double backoff_cap_seconds = 600;  // times a uniform jitter in [0.5, 1]
};
enum class LostCause { kLeaseExpired, kAgentRestarted };
struct LostAttemptOutcome {
  bool requeue = false;      // false: the run fails as lost
  double delay_seconds = 0;  // requeued runs wait this long before they are offered again
  std::string reason;        // the run's failure_reason
};
// `jitter01` is a uniform draw in [0, 1). Restarts requeue at once; lapses back off.
LostAttemptOutcome AfterLostAttempt(int attempt, LostCause cause, const RequeuePolicy& policy,
                                    double jitter01);

// A successful result must hold one sample per measured second (seconds 1..duration).
// Returns why not, or nullopt when the shape is right.
std::optional<std::string> ResultShapeProblem(
    const std::vector<std::pair<uint32_t, uint64_t>>& samples, int duration_seconds);

// Adaptive repetitions: the cells (by index) of which some kernel's comparison with the
// baseline is still wider than ±target. samples: cell -> kernel -> per-run values.
std::vector<int> CellsNeedingMorePairs(
    const std::map<int, std::map<std::string, std::vector<double>>>& samples,
    const std::string& baseline, const stats::CompareOptions& options, double target,
    int max_pairs);

// One planned run: which cell, on which kernel, which repetition, its place in the claim order.
struct RunSlot {
  int cell_index = 0;
  std::string kernel;
  int repetition = 0;
  int sequence = 0;
};
// The one planning rule, for a job's first repetitions (PlanRunOrder) and for every block an
// adaptive job adds later (PlanExtraBlock): repetitions first..last of each kernel in turn,
// in the given kernel order, and in each repetition the cells in the order CellOrder draws
// from the job's seed and the repetition alone, so a block is ordered the same whenever it
// is planned. Sequences continue from next_sequence.
std::vector<RunSlot> PlanBlock(const std::vector<int>& cells,
                               const std::vector<std::string>& kernels, int first, int last,
                               uint64_t seed, int next_sequence);
// `cells` shuffled by an RNG seeded with (seed, repetition): every kernel's run of one
// repetition visits the cells in the same order, so drift within a repetition hits each
// kernel's cells alike.
std::vector<int> CellOrder(std::vector<int> cells, uint64_t seed, int repetition);
// The next block of repetitions (done+1 .. min(max, done+block_size)) for `cells`
// (PlanBlock).
std::vector<RunSlot> PlanExtraBlock(const std::vector<int>& cells,
                                    const std::vector<std::string>& kernels, int done_repetitions,
                                    int block_size, int max_repetitions, uint64_t seed,
                                    int next_sequence);

}  // namespace faultline::controller

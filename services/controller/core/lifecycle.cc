#include "services/controller/core/lifecycle.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <random>

#include "absl/strings/str_cat.h"

namespace faultline::controller {
namespace {

constexpr std::array<std::string_view, 5> kJobStates = {"queued", "running", "succeeded", "failed",
                                                        "cancelled"};
constexpr std::array<std::string_view, 6> kRunStates = {"queued",    "assigned", "running",
                                                        "succeeded", "failed",   "cancelled"};
constexpr std::array<std::string_view, 4> kChangePointStates = {"open", "acknowledged", "fixed",
                                                                "invalid"};
constexpr std::array<std::string_view, 2> kTokenRoles = {"user", "agent"};
constexpr std::array<std::string_view, 3> kBoardHealths = {"ok", "switching", "needs-check"};
constexpr std::array<std::string_view, 4> kBuildStates = {"queued", "building", "done", "failed"};
constexpr std::array<std::string_view, 4> kBisectionStates = {"running", "done", "failed",
                                                              "cancelled"};
constexpr std::array<std::string_view, 7> kSeriesStates = {
    "skipped", "chosen", "submitted", "measured", "replied", "failed", "does_not_apply"};
constexpr std::array<std::string_view, 4> kReplyStates = {"queued", "sending", "sent", "uncertain"};
constexpr std::array<std::string_view, 4> kCheckStatuses = {"queued", "posted", "superseded",
                                                            "failed"};
constexpr std::array<std::string_view, 3> kReplyKinds = {"results", "apply", "culprit"};
constexpr std::array<std::string_view, 2> kCheckKinds = {"pending", "verdict"};
constexpr std::array<std::string_view, 4> kCheckStates = {"pending", "success", "warning", "fail"};

template <typename E, size_t N>
std::optional<E> Parse(const std::array<std::string_view, N>& names, std::string_view s) {
  for (size_t i = 0; i < N; ++i) {
    if (names[i] == s) return static_cast<E>(i);
  }
  return std::nullopt;
}

}  // namespace

std::string_view ToString(JobState s) {
  return kJobStates[static_cast<size_t>(s)];
}
std::string_view ToString(RunState s) {
  return kRunStates[static_cast<size_t>(s)];
}
std::string_view ToString(ChangePointState s) {
  return kChangePointStates[static_cast<size_t>(s)];
}
std::string_view ToString(TokenRole r) {
  return kTokenRoles[static_cast<size_t>(r)];
}
std::string_view ToString(BoardHealth h) {
  return kBoardHealths[static_cast<size_t>(h)];
}
std::string_view ToString(BuildState s) {
  return kBuildStates[static_cast<size_t>(s)];
}
std::string_view ToString(BisectionState s) {
  return kBisectionStates[static_cast<size_t>(s)];
}
std::optional<BuildState> ParseBuildState(std::string_view s) {
  return Parse<BuildState>(kBuildStates, s);
}
std::optional<BisectionState> ParseBisectionState(std::string_view s) {
  return Parse<BisectionState>(kBisectionStates, s);
}

std::string_view ToString(SeriesState s) {
  return kSeriesStates[static_cast<size_t>(s)];
}

std::optional<SeriesState> ParseSeriesState(std::string_view s) {
  return Parse<SeriesState>(kSeriesStates, s);
}

std::string_view ToString(ReplyState s) {
  return kReplyStates[static_cast<size_t>(s)];
}

std::optional<ReplyState> ParseReplyState(std::string_view s) {
  return Parse<ReplyState>(kReplyStates, s);
}

std::string_view ToString(CheckStatus s) {
  return kCheckStatuses[static_cast<size_t>(s)];
}

std::optional<CheckStatus> ParseCheckStatus(std::string_view s) {
  return Parse<CheckStatus>(kCheckStatuses, s);
}
std::string_view ToString(ReplyKind k) {
  return kReplyKinds[static_cast<size_t>(k)];
}
std::optional<ReplyKind> ParseReplyKind(std::string_view s) {
  return Parse<ReplyKind>(kReplyKinds, s);
}
std::string_view ToString(CheckKind k) {
  return kCheckKinds[static_cast<size_t>(k)];
}
std::optional<CheckKind> ParseCheckKind(std::string_view s) {
  return Parse<CheckKind>(kCheckKinds, s);
}
std::string_view ToString(CheckState s) {
  return kCheckStates[static_cast<size_t>(s)];
}
std::optional<CheckState> ParseCheckState(std::string_view s) {
  return Parse<CheckState>(kCheckStates, s);
}
std::optional<JobState> ParseJobState(std::string_view s) {
  return Parse<JobState>(kJobStates, s);
}
std::optional<RunState> ParseRunState(std::string_view s) {
  return Parse<RunState>(kRunStates, s);
}
std::optional<ChangePointState> ParseChangePointState(std::string_view s) {
  return Parse<ChangePointState>(kChangePointStates, s);
}
std::optional<TokenRole> ParseTokenRole(std::string_view s) {
  return Parse<TokenRole>(kTokenRoles, s);
}
std::optional<BoardHealth> ParseBoardHealth(std::string_view s) {
  return Parse<BoardHealth>(kBoardHealths, s);
}

bool IsFinal(JobState s) {
  return s == JobState::kSucceeded || s == JobState::kFailed || s == JobState::kCancelled;
}
bool IsFinal(RunState s) {
  return s == RunState::kSucceeded || s == RunState::kFailed || s == RunState::kCancelled;
}
bool IsOpen(RunState s) {
  return s == RunState::kQueued || s == RunState::kAssigned || s == RunState::kRunning;
}

JobState JobStateFromRuns(int open, int started, int failed) {
  if (open > 0) return started > 0 ? JobState::kRunning : JobState::kQueued;
  return failed > 0 ? JobState::kFailed : JobState::kSucceeded;
}

LostAttemptOutcome AfterLostAttempt(int attempt, LostCause cause, const RequeuePolicy& policy,
                                    double jitter01) {
  LostAttemptOutcome out;
  const std::string what = cause == LostCause::kLeaseExpired
                               ? absl::StrCat("lease expired on attempt ", attempt)
                               : absl::StrCat("agent restarted during attempt ", attempt);
  out.requeue = attempt < policy.max_attempts;
  out.reason = out.requeue ? what : absl::StrCat("lost: ", what);
  if (out.requeue && cause == LostCause::kLeaseExpired) {
    const double backoff =
        std::min(policy.backoff_cap_seconds,
                 policy.backoff_seconds * std::ldexp(1.0, std::max(0, attempt - 1)));
    out.delay_seconds = backoff * (0.5 + std::clamp(jitter01, 0.0, 1.0) / 2);
  }
  return out;
}

std::optional<std::string> ResultShapeProblem(
    const std::vector<std::pair<uint32_t, uint64_t>>& samples, int duration_seconds) {
  bool ok = samples.size() == static_cast<size_t>(std::max(0, duration_seconds));
  for (size_t i = 0; ok && i < samples.size(); ++i) ok = samples[i].first == i + 1;
  if (ok) return std::nullopt;
  return absl::StrCat("invalid result: expected samples for seconds 1..", duration_seconds,
                      ", got ", samples.size(), " samples");
}

std::vector<int> CellsNeedingMorePairs(
    const std::map<int, std::map<std::string, std::vector<double>>>& samples,
    const std::string& baseline, const stats::CompareOptions& options, double target,
    int max_pairs) {
  std::vector<int> cells;
  for (const auto& [cell, by_kernel] : samples) {
    auto a = by_kernel.find(baseline);
    if (a == by_kernel.end()) continue;
    for (const auto& [kernel, b] : by_kernel) {
      if (kernel == baseline) continue;
      if (stats::NeedsMorePairs(Compare(a->second, b, options), target, max_pairs)) {
        cells.push_back(cell);
        break;
      }
    }
  }
  return cells;
}

std::vector<int> CellOrder(std::vector<int> cells, uint64_t seed, int repetition) {
  std::mt19937_64 rng(seed ^ (static_cast<uint64_t>(repetition) * 0x9E3779B97F4A7C15ull));
  std::shuffle(cells.begin(), cells.end(), rng);
  return cells;
}

std::vector<RunSlot> PlanBlock(const std::vector<int>& cells,
                               const std::vector<std::string>& kernels, int first, int last,
                               uint64_t seed, int next_sequence) {
  std::vector<RunSlot> out;
  for (const auto& kernel : kernels) {
    for (int repetition = first; repetition <= last; ++repetition) {
      for (int cell : CellOrder(cells, seed, repetition)) {
        out.push_back({cell, kernel, repetition, next_sequence++});
      }
    }
  }
  return out;
}

std::vector<RunSlot> PlanExtraBlock(const std::vector<int>& cells,
                                    const std::vector<std::string>& kernels, int done_repetitions,
                                    int block_size, int max_repetitions, uint64_t seed,
                                    int next_sequence) {
  if (cells.empty() || done_repetitions >= max_repetitions) return {};
  const int last = std::min(max_repetitions, done_repetitions + std::max(1, block_size));
  return PlanBlock(cells, kernels, done_repetitions + 1, last, seed, next_sequence);
}

}  // namespace faultline::controller

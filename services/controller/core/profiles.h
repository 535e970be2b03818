#pragma once
// A comparison's call stacks per kernel (issue #46, docs/profiles.md), from the runs'
// folded stacks (each result's folded_stacks: "root;...;leaf COUNT" a line, written by
// agent/workloads/profile_sampling.h): what the HTML page draws its flame graphs from.
// Each side's stacks are samples per round (a stack's CPU time per unit of work, as the
// frame counters are), averaged over the side's runs: a run without the stack counts 0.
#include <cstddef>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace faultline::controller {

// The environment key an agent before WorkloadResult.folded_stacks sent a profiled run's
// stacks under: moved out to the result's folded_stacks on arrival (convert.cc), and out of
// results stored before by migration 34. A result of the run, never one of its facts.
inline constexpr std::string_view kFoldedStacksKey = "profile.folded";

// At most this many stacks per side in a report (the most sampled).
inline constexpr size_t kMaxReportStacks = 2000;

struct FoldedStack {
  std::string stack;
  double per_round = 0;
};

// One run's folded text as samples per round by stack; malformed lines are skipped; empty
// when `rounds` is not positive.
std::map<std::string, double> FoldedPerRound(std::string_view folded, double rounds);

// The side's stacks: each stack's samples per round averaged over `runs`, the most sampled
// first (ties by stack), at most `limit`.
std::vector<FoldedStack> MergeStacks(const std::vector<std::map<std::string, double>>& runs,
                                     size_t limit = kMaxReportStacks);

}  // namespace faultline::controller

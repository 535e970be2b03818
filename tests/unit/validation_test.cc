#include "services/controller/core/validation.h"
#include "services/controller/core/lifecycle.h"

#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "common/benchmarks.h"
#include "common/units.h"
#include "services/controller/core/report.h"

namespace faultline::controller {
namespace {

std::vector<BoardSummary> OneBoard() {
  return {BoardSummary{.name = "box",
                       .arch = "x86_64",
                       .memory_bytes = 24ull << 30,
                       .kernel_labels = {"vanilla", "patched"},
                       .running_kernel_label = "vanilla",
                       .running_kernel_labels = {"vanilla"}}};
}

JobSpecInput Example() {
  JobSpecInput s;
  s.benchmark = "filemap-thrash";
  s.duration = "5s";
  s.repetitions = 3;
  s.kernels = {"vanilla"};
  s.memory_max = "256M";
  s.memory_high = "192M";
  s.swap_max = "0";
  s.params = {{"file_size", "16M"}};
  s.matrix = {{"threads", {"4", "8"}}};
  return s;
}

// Expects InvalidArgument whose message starts with the field and contains `fragment`.
void ExpectInvalid(const JobSpecInput& spec, const std::string& field, const std::string& fragment,
                   const std::vector<BoardSummary>& boards = OneBoard()) {
  auto r = ValidateJobSpec(spec, boards);
  ASSERT_FALSE(r.ok()) << "accepted a bad spec (expected error on " << field << ")";
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  std::string message(r.status().message());
  EXPECT_EQ(message.rfind("spec." + field + ":", 0), 0u) << message;
  EXPECT_NE(message.find(fragment), std::string::npos) << message;
}

TEST(ValidateJobSpec, AcceptsTheIssueExampleAndExpandsIt) {
  auto job = ValidateJobSpec(Example(), OneBoard());
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->duration, std::chrono::seconds(5));
  EXPECT_EQ(job->memcg.memory_max, 256u << 20);
  EXPECT_EQ(job->memcg.memory_high, 192u << 20);
  EXPECT_EQ(job->memcg.swap_max, 0u);
  ASSERT_EQ(job->runs.size(), 2u * 1 * 3);
  // Defaults are filled in and every run carries every knob.
  EXPECT_EQ(job->runs[0].params.at("file_size"), "16M");
  EXPECT_EQ(job->runs[0].params.at("munmap_threads"), "0");
  std::set<std::string> first_rep = {job->runs[0].params.at("threads"),
                                     job->runs[1].params.at("threads")};
  EXPECT_EQ(first_rep, (std::set<std::string>{"4", "8"}));
  EXPECT_EQ(job->baseline, "vanilla");
  EXPECT_EQ(job->block_size, 1u);
  EXPECT_DOUBLE_EQ(job->alpha, 0.01);
  EXPECT_DOUBLE_EQ(job->min_effect, 0.03);
  EXPECT_EQ(job->runs[0].repetition, 1);
  EXPECT_EQ(job->runs[5].repetition, 3);
  EXPECT_EQ(job->fixed_params.count("threads"), 0u);
}

TEST(ValidateJobSpec, RefusesEachBadInputNamingFieldAndLimit) {
  auto s = Example();
  s.benchmark = "filemap-trash";
  ExpectInvalid(s, "benchmark", "known: filemap-thrash, swap-in, mmap-writer-pressure");

  s = Example();
  s.params["threadz"] = "3";
  ExpectInvalid(s, "params.threadz", "unknown knob");

  s = Example();
  s.matrix = {{"threads", {"0", "8"}}};
  ExpectInvalid(s, "matrix.threads[0]", "between 1 and 4096, got 0");

  s = Example();
  s.matrix = {{"threads", {"4097"}}};
  ExpectInvalid(s, "matrix.threads[0]", "between 1 and 4096");

  s = Example();
  s.memory_max = "8M";
  ExpectInvalid(s, "memcg.memory_max", "at least 16M");

  s = Example();
  s.memory_max = "64G";
  ExpectInvalid(s, "memcg.memory_max", "board's RAM (24G");

  s = Example();
  s.duration = "0s";
  ExpectInvalid(s, "duration", "positive");

  s = Example();
  s.duration = "5h";
  ExpectInvalid(s, "duration", "at most 4h");

  s = Example();
  s.duration = "1500ms";
  ExpectInvalid(s, "duration", "whole seconds");

  s = Example();
  s.kernels = {"vanila"};
  ExpectInvalid(s, "kernels[0]", "unknown kernel label 'vanila' (known: patched, vanilla)");

  s = Example();
  s.matrix = {{"threads", {}}};
  ExpectInvalid(s, "matrix.threads", "at least one value");

  s = Example();
  s.repetitions = 0;
  ExpectInvalid(s, "repetitions", "between 1 and 1000, got 0");

  s = Example();
  s.memory_high = "512M";
  ExpectInvalid(s, "memcg.memory_high", "memory_max");

  s = Example();
  s.matrix = {{"file_size", {"1M"}}};
  ExpectInvalid(s, "matrix.file_size", "also set in params");

  s = Example();
  s.matrix = {{"preset", {"v5-filemap-small"}}};
  ExpectInvalid(s, "matrix.preset", "choose it in params");

  s = Example();
  s.arches = {"sparc"};
  ExpectInvalid(s, "arches[0]", "unknown arch");

  s = Example();
  ExpectInvalid(s, "kernels[0]", "no eligible board", {});
}

TEST(ValidateJobSpec, ChecksTheABSettings) {
  auto s = Example();
  s.kernels = {"vanilla", "patched"};
  s.baseline = "other";
  ExpectInvalid(s, "baseline", "must be one of the job's kernels (vanilla, patched)");
  s.baseline = "patched";
  s.block_size = 4;
  ExpectInvalid(s, "block_size", "between 1 and repetitions (3), got 4");
  s.block_size = 0;
  s.alpha = 0.7;
  ExpectInvalid(s, "alpha", "(0, 0.5]");
  s.alpha = 0;
  s.min_effect = 1.5;
  ExpectInvalid(s, "min_effect", "(0, 1)");
  s.min_effect = 0;
  auto job = ValidateJobSpec(s, OneBoard());
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->kernels, (std::vector<std::string>{"patched", "vanilla"}));  // baseline first
  EXPECT_EQ(job->runs.front().kernel, "patched");
}

// The lease covers the longest warm-up of any run, wherever it is set: the fixed knob, a
// matrix axis, or one kernel's override (which the lease once ignored).
TEST(ValidateJobSpec, TheJobsWarmUpIsTheLongestOfAnyRun) {
  auto s = Example();
  s.kernels = {"vanilla", "patched"};
  auto job = ValidateJobSpec(s, OneBoard());
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->warmup, std::chrono::milliseconds(0)) << "the default: none";
  s.params["warmup"] = "500ms";
  job = ValidateJobSpec(s, OneBoard());
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->warmup, std::chrono::milliseconds(500));
  s.kernel_overrides["patched"] = {{"warmup", "7s"}};
  job = ValidateJobSpec(s, OneBoard());
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->warmup, std::chrono::seconds(7));
  for (const auto& run : job->runs) {
    EXPECT_EQ(run.params.at("warmup"), run.kernel == "patched" ? "7s" : "500ms");
  }
  s.kernel_overrides.clear();
  s.params.erase("warmup");
  s.matrix.emplace_back("warmup", std::vector<std::string>{"1s", "3000ms"});
  job = ValidateJobSpec(s, OneBoard());
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->warmup, std::chrono::seconds(3));
}

TEST(ValidateJobSpec, KernelOverridesReplaceFixedKnobsForOneLabel) {
  auto s = Example();
  s.kernels = {"vanilla", "patched"};
  s.kernel_overrides["patched"] = {{"munmap_threads", "2"}};
  auto job = ValidateJobSpec(s, OneBoard());
  ASSERT_TRUE(job.ok()) << job.status();
  for (const auto& run : job->runs) {
    EXPECT_EQ(run.params.at("munmap_threads"), run.kernel == "patched" ? "2" : "0");
  }
  s.kernel_overrides["patched"] = {{"threads", "2"}};
  ExpectInvalid(s, "kernel_overrides.patched.params.threads", "swept by the matrix");
  s.kernel_overrides["patched"] = {{"munmap_threads", "5000"}};
  ExpectInvalid(s, "kernel_overrides.patched.params.munmap_threads", "between 0 and 4096");
  s.kernel_overrides.clear();
  s.kernel_overrides["other"] = {};
  ExpectInvalid(s, "kernel_overrides.other", "not one of the job's kernels");
}

TEST(ValidateJobSpec, APresetFillsDurationMemcgAndMatrixTheSpecLeavesOut) {
  JobSpecInput s;
  s.repetitions = 2;
  s.kernels = {"vanilla"};
  s.params = {{"preset", "v5-filemap-small"}};
  auto job = ValidateJobSpec(s, OneBoard());
  ASSERT_TRUE(job.ok()) << job.status();
  const PresetSpec* preset = FindPreset("v5-filemap-small");
  ASSERT_NE(preset, nullptr);
  EXPECT_EQ(job->benchmark, preset->benchmark);
  EXPECT_EQ(job->duration, std::chrono::seconds(preset->duration_seconds));
  EXPECT_EQ(job->memcg.memory_max, *ParseSize(preset->memcg.memory_max));
  ASSERT_EQ(job->matrix.size(), preset->matrix.size());
  EXPECT_EQ(job->runs.size(), preset->matrix.front().second.size() * 2);
  // The spec wins over the preset.
  s.duration = "3s";
  s.memory_max = "200M";
  s.matrix = {{"threads", {"2"}}};
  auto mine = ValidateJobSpec(s, OneBoard());
  ASSERT_TRUE(mine.ok()) << mine.status();
  EXPECT_EQ(mine->duration, std::chrono::seconds(3));
  EXPECT_EQ(mine->memcg.memory_max, 200u << 20);
  EXPECT_EQ(mine->runs.size(), 2u);
  s.params["preset"] = "no-such-preset";
  ExpectInvalid(s, "params.preset", "unknown preset 'no-such-preset' (known: v2-file-thrash");
}

TEST(PlanRunOrder, AlternatesKernelBlocksAndShufflesCellsReproducibly) {
  std::vector<Cell> cells = ExpandMatrix({{"threads", {"1", "2", "3", "4"}}});
  auto runs = PlanRunOrder(cells, {"A", "B"}, 4, 2, 42);
  ASSERT_EQ(runs.size(), 4u * 2 * 4);
  // Kernel per run: A-block (reps 1-2), B-block (reps 1-2), A-block (reps 3-4), B-block.
  std::string pattern;
  for (size_t i = 0; i < runs.size(); i += 8) pattern += runs[i].kernel;
  EXPECT_EQ(pattern, "ABAB");
  for (size_t i = 0; i < runs.size(); ++i) {
    EXPECT_EQ(runs[i].sequence, static_cast<int>(i));
    EXPECT_EQ(runs[i].kernel, runs[i / 8 * 8].kernel);
  }
  EXPECT_EQ(runs[0].repetition, 1);
  EXPECT_EQ(runs[4].repetition, 2);
  EXPECT_EQ(runs[16].repetition, 3);
  // Every repetition holds every cell once; the order differs between repetitions.
  bool some_order_differs = false;
  for (size_t r = 0; r < runs.size(); r += 4) {
    std::set<int> seen;
    for (size_t i = r; i < r + 4; ++i) seen.insert(runs[i].cell_index);
    EXPECT_EQ(seen.size(), 4u);
    for (size_t i = r; i < r + 4; ++i) {
      if (runs[i].cell_index != runs[i - r].cell_index) some_order_differs = true;
    }
  }
  EXPECT_TRUE(some_order_differs);
  // The same seed gives the same order.
  auto again = PlanRunOrder(cells, {"A", "B"}, 4, 2, 42);
  for (size_t i = 0; i < runs.size(); ++i) EXPECT_EQ(runs[i].cell_index, again[i].cell_index);
}

TEST(PlanRunOrder, ABlockAddedLaterIsPlannedAsTheJobsOwn) {
  // One rule (PlanBlock): an adaptive job's extra block (repetitions 3-4, planned after 1-2
  // ran) is ordered exactly as a job planned with 4 repetitions from the start.
  std::vector<Cell> cells = ExpandMatrix({{"threads", {"1", "2", "3", "4", "5"}}});
  const auto whole = PlanRunOrder(cells, {"A", "B"}, 4, 2, 7);
  const auto extra = PlanExtraBlock({0, 1, 2, 3, 4}, {"A", "B"}, 2, 2, 4, 7, 20);
  ASSERT_EQ(extra.size(), 20u);
  for (size_t i = 0; i < extra.size(); ++i) {
    const PlannedRun& w = whole[20 + i];
    EXPECT_EQ(extra[i].cell_index, w.cell_index) << i;
    EXPECT_EQ(extra[i].kernel, w.kernel) << i;
    EXPECT_EQ(extra[i].repetition, w.repetition) << i;
    EXPECT_EQ(extra[i].sequence, w.sequence) << i;
  }
  // Within a repetition every kernel visits the cells in the same order.
  for (size_t i = 0; i < 5; ++i) EXPECT_EQ(whole[i].cell_index, whole[10 + i].cell_index);
  EXPECT_TRUE(PlanExtraBlock({0, 1}, {"A", "B"}, 4, 2, 4, 7, 40).empty()) << "at max";
}

TEST(ValidateJobSpec, BoundsTheNumberOfRuns) {
  auto s = Example();
  s.repetitions = 1000;
  s.matrix = {{"threads", {"1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11"}}};
  ExpectInvalid(s, "matrix", "at most 10000");
}

TEST(ValidateJobSpec, ArchFilterExcludesBoards) {
  auto s = Example();
  s.arches = {"aarch64"};
  ExpectInvalid(s, "kernels[0]", "no eligible board");
}

TEST(ValidateJobSpec, EachBoardGivesEveryBoardThatBootsAllKernelsTheWholePlan) {
  auto boards = OneBoard();
  boards.push_back(boards[0]);
  boards[1].name = "arm";
  boards[1].arch = "aarch64";
  boards.push_back(boards[0]);
  boards[2].name = "old";
  boards[2].kernel_labels = {"vanilla"};  // cannot boot patched: not a replica
  boards.push_back(boards[2]);
  boards[3].name = "new";
  boards[3].kernel_labels = {"patched"};
  auto s = Example();
  s.kernels = {"vanilla", "patched"};
  s.repetitions = 2;
  s.each_board = true;
  auto job = ValidateJobSpec(s, boards);
  ASSERT_TRUE(job.ok()) << job.status();
  ASSERT_EQ(job->runs.size(), 2u * 2 * 2 * 2);  // cells x kernels x repetitions x boards
  std::map<std::string, std::vector<std::string>> kernels_by_board;
  for (size_t i = 0; i < job->runs.size(); ++i) {
    EXPECT_EQ(job->runs[i].sequence, static_cast<int>(i));
    kernels_by_board[job->runs[i].board].push_back(job->runs[i].kernel);
  }
  ASSERT_EQ(kernels_by_board.size(), 2u);
  // Each board's own order is the plan: blocks of one repetition alternate.
  const std::vector<std::string> plan = {"vanilla", "vanilla", "patched", "patched",
                                         "vanilla", "vanilla", "patched", "patched"};
  EXPECT_EQ(kernels_by_board["box"], plan);
  EXPECT_EQ(kernels_by_board["arm"], plan);

  s.boards = {"old", "new"};  // between them they boot both, but neither boots both
  ExpectInvalid(s, "each_board", "no eligible board serves every kernel", boards);
  s.boards = {};
  s.repetitions = 1000;
  s.matrix = {{"threads", {"1", "2", "3", "4", "5"}}};
  ExpectInvalid(s, "matrix", "x 2 boards); at most 10000", boards);
}

// Run options are checked by convert (tests/unit/run_options_test.cc); core carries them
// from the spec to the job as they came, unread.
TEST(ValidateJobSpec, RunOptionsAreCarriedUnread) {
  auto s = Example();
  auto job = ValidateJobSpec(s, OneBoard());
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->run_options, "{}");
  s.run_options = R"({"events":["sw:page-faults"],"profile":{"frequency_hz":99}})";
  job = ValidateJobSpec(s, OneBoard());
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->run_options, s.run_options);
}

TEST(ExpandMatrix, CartesianProductFirstKeySlowest) {
  auto cells = ExpandMatrix({{"a", {"1", "2"}}, {"b", {"x", "y", "z"}}});
  ASSERT_EQ(cells.size(), 6u);
  EXPECT_EQ(cells[0], (Cell{{"a", "1"}, {"b", "x"}}));
  EXPECT_EQ(cells[2], (Cell{{"a", "1"}, {"b", "z"}}));
  EXPECT_EQ(cells[3], (Cell{{"a", "2"}, {"b", "x"}}));
  EXPECT_EQ(ExpandMatrix({}).size(), 1u);
}

TEST(Summarize, MedianMinMaxPerCellKernelBoard) {
  Cell four{{"threads", "4"}};
  std::vector<RunOutcome> outcomes = {
      {four, "vanilla", "box", true, false, 10}, {four, "vanilla", "box", true, false, 30},
      {four, "vanilla", "box", true, false, 20}, {four, "vanilla", "box", false, true, 0},
      {four, "patched", "box", true, false, 5},  {four, "patched", "box", true, false, 7},
  };
  auto rows = Summarize(outcomes);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].n, 3u);
  EXPECT_EQ(rows[0].failed, 1u);
  EXPECT_DOUBLE_EQ(rows[0].median, 20);
  EXPECT_DOUBLE_EQ(rows[0].min, 10);
  EXPECT_DOUBLE_EQ(rows[0].max, 30);
  EXPECT_DOUBLE_EQ(rows[1].median, 6);  // even n: mean of the middle two
}

// A slow swap-in pass can end a run with 0-4 completed rounds: such a cell is compared in
// pages per second (for every kernel), never as "0 rounds/s".
TEST(CompareKernels, CellsWithTooCoarseRunsAreComparedInPagesPerSecond) {
  Cell slow{{"region", "64M"}}, fast{{"region", "1M"}};
  std::vector<RunOutcome> outcomes;
  for (int i = 0; i < 6; ++i) {
    // Rounds say A=0..1/s, B=1..2/s (a "change" that is only quantisation); pages agree.
    outcomes.push_back(
        {slow, "a", "box", true, false, i % 2 == 0 ? 0.0 : 1.0, -1, true, 1000.0 + i});
    outcomes.push_back(
        {slow, "b", "box", true, false, i % 2 == 0 ? 1.0 : 2.0, -1, true, 1000.5 + i});
    outcomes.push_back({fast, "a", "box", true, false, 100.0 + i, -1, false, 25600.0 + i});
    outcomes.push_back({fast, "b", "box", true, false, 70.0 + i, -1, false, 17920.0 + i});
  }
  stats::CompareOptions options;
  options.alpha = 0.05;
  options.min_effect = 0.03;
  auto rows = CompareKernels(outcomes, "a", {"a", "b"}, options);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].cell, slow);
  EXPECT_EQ(rows[0].metric, "pages/s");
  EXPECT_NEAR(rows[0].stats.median_a, 1002.5, 1e-9);
  EXPECT_NEAR(rows[0].stats.ratio, 1.0, 0.01);
  EXPECT_NE(rows[0].stats.verdict, stats::Verdict::kImprovement);
  EXPECT_EQ(rows[1].metric, "rounds/s");
  EXPECT_NEAR(rows[1].stats.median_a, 102.5, 1e-9);
  EXPECT_EQ(rows[1].stats.verdict, stats::Verdict::kRegression);

  auto summary = Summarize(outcomes);
  ASSERT_EQ(summary.size(), 4u);
  EXPECT_EQ(summary[0].too_coarse, 6u);
  EXPECT_NEAR(summary[0].median_pages_per_second, 1002.5, 1e-9);
  EXPECT_EQ(summary[2].too_coarse, 0u);
}

// Alternating blocks pair run i of A with run i of B: with enough pairs to reach α the
// verdict is the paired one, which sees through a board that slows down over the study.
TEST(CompareKernels, EnoughPairsOfAlternatingRunsGiveThePairedVerdict) {
  Cell cell{{"threads", "2"}};
  std::vector<RunOutcome> outcomes;
  const double wobble[] = {1.00, 1.01, 0.99, 1.00, 1.01, 0.99, 1.00, 1.01, 0.99, 1.00};
  for (int i = 0; i < 10; ++i) {
    const double level = 300 * std::pow(0.93, i);  // drift over the job
    outcomes.push_back({cell, "a", "box", true, false, level * wobble[i], i});
    outcomes.push_back({cell, "b", "box", true, false, level * 1.05 * wobble[9 - i], i});
  }
  stats::CompareOptions options;
  options.alpha = 0.01;
  options.min_effect = 0.03;
  EXPECT_EQ(MinPairsForAlpha(0.01), 8);
  EXPECT_EQ(MinPairsForAlpha(0.05), 6);
  auto rows = CompareKernels(outcomes, "a", {"a", "b"}, options);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_TRUE(rows[0].stats.paired);
  EXPECT_EQ(rows[0].stats.verdict, stats::Verdict::kImprovement);
  EXPECT_NEAR(rows[0].stats.ratio, 1.05, 0.02);
  EXPECT_FALSE(rows[0].unpaired.paired);
  EXPECT_NE(rows[0].unpaired.verdict, stats::Verdict::kImprovement);  // drift hides it unpaired
  EXPECT_GT(rows[0].unpaired.ci_high / rows[0].unpaired.ci_low,
            rows[0].stats.ci_high / rows[0].stats.ci_low);

  // Seven pairs cannot reach α = 0.01 paired: the unpaired test decides.
  outcomes.resize(14);
  rows = CompareKernels(outcomes, "a", {"a", "b"}, options);
  EXPECT_FALSE(rows[0].stats.paired);
}

TEST(ValidateJobSpec, AdaptiveRepetitionsAreBoundedAndNeedAComparison) {
  JobSpecInput spec = Example();
  spec.kernels = {"vanilla", "patched"};
  spec.repetitions = 3;
  spec.max_repetitions = 10;
  auto job = ValidateJobSpec(spec, OneBoard());
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->max_repetitions, 10u);
  EXPECT_DOUBLE_EQ(job->target_ci_half_width, job->min_effect);  // default: δ

  spec.max_repetitions = 2;
  EXPECT_EQ(ValidateJobSpec(spec, OneBoard()).status().message(),
            "spec.max_repetitions: must be between repetitions (3) and 1000, got 2");
  spec.max_repetitions = 10;
  spec.target_ci_half_width = 1.5;
  EXPECT_EQ(ValidateJobSpec(spec, OneBoard()).status().message(),
            "spec.target_ci_half_width: must be in (0, 1), got 1.5");
  spec.kernels = {"vanilla"};
  spec.target_ci_half_width = 0;
  EXPECT_EQ(ValidateJobSpec(spec, OneBoard()).status().message(),
            "spec.max_repetitions: adaptive repetitions need at least two kernels to compare");
  spec.max_repetitions = 0;
  spec.target_ci_half_width = 0.02;
  EXPECT_EQ(ValidateJobSpec(spec, OneBoard()).status().message(),
            "spec.target_ci_half_width: needs max_repetitions (adaptive repetitions)");
}

}  // namespace
}  // namespace faultline::controller

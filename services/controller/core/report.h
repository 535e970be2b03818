#pragma once
#include <map>
#include <string>
#include <vector>

#include "services/controller/core/counters.h"
#include "services/controller/core/domain.h"
#include "services/controller/core/lock_wait_tables.h"
#include "services/controller/core/profiles.h"
#include "stats/statistics.h"

namespace faultline::controller {

double Median(std::vector<double> values);

// Groups outcomes by (cell, kernel, board) in first-seen order and summarises succeeded runs.
std::vector<SummaryRow> Summarize(const std::vector<RunOutcome>& outcomes);

// Kernel B vs the baseline for one cell on one board.
struct ComparisonRow {
  Cell cell;
  std::string board;
  std::string baseline;
  std::string candidate;
  stats::CellComparison stats;      // what the verdict is based on (paired or unpaired)
  std::string metric = "rounds/s";  // "pages/s" when a run of the cell was too coarse
  stats::CellComparison unpaired;   // the unpaired estimate, always (equal to stats if unpaired)
};

// Smallest number of pairs with which the exact two-sided signed-rank p can reach α at
// all (2/2^n ≤ α): 8 at α = 0.01. With fewer pairs the unpaired rank-sum test (which
// reaches α = 0.01 from 5 runs a side) decides, and the paired figures are not used.
int MinPairsForAlpha(double alpha);

// Compares every non-baseline kernel with the baseline, per board and cell (runs of
// different boards are never mixed), then applies Benjamini–Hochberg and the verdicts
// across the whole study. Rows follow the cells' first appearance; boards in name order.
// Kernels alternate in blocks, so run i of A and run i of B (by repetition) ran side by
// side: with at least MinPairsForAlpha pairs the verdict uses the paired analysis
// (ComparePaired), which cancels the board's slow drift; the unpaired one is kept beside.
std::vector<ComparisonRow> CompareKernels(const std::vector<RunOutcome>& outcomes,
                                          const std::string& baseline,
                                          const std::vector<std::string>& kernels,
                                          const stats::CompareOptions& options);

// One run's environment, for spotting what differs between the kernels on a board.
struct RunEnvironment {
  std::string board;
  std::string kernel;
  std::map<std::string, std::string> facts;
};

// Keys whose values differ between kernels on the same board, as
// "board/key" -> "kernelA: v1 | kernelB: v2". Per-run values (params, limits, labels) are
// ignored: they differ by design. (The runs' folded stacks are a result of their own, never
// in the environment: core/profiles.h.)
std::map<std::string, std::string> EnvironmentDifferences(const std::vector<RunEnvironment>& runs);

// Per board, the facts its runs recorded about it (cpu.*, memory.*, thp.*, swap.*, cgroup.*,
// virt.*, mm.*, page_size, kernel.release and the kernel's mm features): the value they agree
// on, or the distinct values in sorted order joined by " | " (the report's header says what
// each board was).
std::map<std::string, std::map<std::string, std::string>> BoardFactsOf(
    const std::vector<RunEnvironment>& runs);

// "threads=8,writers=2" (sorted keys) or "default" for a job without a matrix: how a cell
// is named in metrics and in the history of a series.
std::string ConfigLabel(const std::map<std::string, std::string>& cell);

// The kernel of a series: a label as jobs run it, without the slot a schedule that follows
// a branch gives each night's build ("nightly@3f9c2a1b04de+20261203T0200" is the series
// "nightly@3f9c2a1b04de"; orchestration/kernel_sources.h). Other labels are their own
// series. The storage's faultline_series_kernel() (migration 25) is the same rule.
std::string SeriesKernel(const std::string& label);

// One kernel against the baseline on a board and cell, with every counter compared under it.
struct ReportComparison {
  ComparisonRow row;
  std::vector<CounterComparison> counters;
  // The seed's mmap_lock tables when the runs traced mmap_lock waits (lock_wait_tables.h).
  std::vector<MedianTable> tables;
  // Each side's call stacks where the runs were profiled and the report asked (profiles.h).
  std::vector<FoldedStack> baseline_stacks;
  std::vector<FoldedStack> candidate_stacks;
};

// One succeeded run's figures and the counters a report was asked for (seed-shaped tables).
struct ReportRunResult {
  std::map<std::string, std::string> cell;
  std::string kernel;
  std::string board;
  int repetition = 0;
  uint64_t rounds = 0;
  double throughput = 0;
  std::map<std::string, double> counters;  // every requested name; 0 where the run has none
  uint32_t order = 0;                      // 1-based, among the job's succeeded runs by finish time
  std::vector<double> samples;             // rounds each second (ReportOptions::samples)
};

// A job's report as the controller builds it (orchestration/report_builder.h) and reads it
// (GetReport converts it at the API's edge; /metrics summarizes its comparisons).
struct JobReport {
  std::vector<std::string> matrix_keys;
  std::vector<SummaryRow> rows;
  std::vector<ReportComparison> comparisons;
  double alpha = 0;
  double min_effect = 0;
  std::map<std::string, std::string> environment_differences;
  std::vector<std::string> caveats;
  std::vector<ReportRunResult> run_results;
  std::map<std::string, std::map<std::string, std::string>> board_facts;  // BoardFactsOf
};

}  // namespace faultline::controller

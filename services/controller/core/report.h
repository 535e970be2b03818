#pragma once
#include <map>
#include <string>
#include <vector>

#include "services/controller/core/domain.h"
#include "services/controller/core/statistics.h"

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
  CellComparison stats;             // what the verdict is based on (paired or unpaired)
  std::string metric = "rounds/s";  // "pages/s" when a run of the cell was too coarse
  CellComparison unpaired;          // the unpaired estimate, always (equal to stats if unpaired)
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
                                          const CompareOptions& options);

// One run's environment, for spotting what differs between the kernels on a board.
struct RunEnvironment {
  std::string board;
  std::string kernel;
  std::map<std::string, std::string> facts;
};

// Keys whose values differ between kernels on the same board, as
// "board/key" -> "kernelA: v1 | kernelB: v2". Per-run values (params, limits, labels) are
// ignored: they differ by design.
std::map<std::string, std::string> EnvironmentDifferences(const std::vector<RunEnvironment>& runs);

}  // namespace faultline::controller

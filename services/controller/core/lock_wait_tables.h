#pragma once
// The seed series' three mmap_lock tables (docs/lock-waits.md), from the
// runs' mmap_lock_wait.* counters (agent/workloads/lock_wait_tracing.h), kernel A (Before)
// against kernel B (After) on one board and cell:
//   mmap_lock Acquisitions And Wait Time            read/write count, total and average wait
//   Read Lock Waiting Time Distribution of mmap_lock   acquisitions per decade of µs
//   Write Lock Waiting Time Distribution of mmap_lock
// and, where the runs traced lock:contention_begin/end, a fourth: the true contention
// (contended acquisitions, their wait, the longest), as `perf lock contention` reports it.
// The seed averages warm starts; a faultline run is a fixed interval, so each value is per
// round of the benchmark (per second when a run completed too few rounds, as the counters
// are): Before and After are medians over the runs with their distribution-free 95% CI, and
// Change is the Hodges–Lehmann B/A (paired by repetition when the throughput comparison is)
// with its CI. The average wait is each run's total over its count (µs, no unit).
#include <limits>
#include <string>
#include <vector>

#include "services/controller/core/counters.h"
#include "stats/statistics.h"

namespace faultline::controller {

struct MedianTableRow {
  std::string label;               // "Read Lock Count", "[0, 1)", ...
  stats::MedianInterval baseline;  // per unit; n = runs with a value
  stats::MedianInterval candidate;
  double ratio = 0;  // B/A, NaN when not comparable (a side all zero)
  double ci_low = 0;
  double ci_high = 0;
  bool per_unit = true;  // false: per acquisition (average, maximum wait)
  // Two-sided p of the change (the rank test on the values; NaN where a side is all zero),
  // q: Benjamini–Hochberg across every row of every table of the comparison, and
  // significant: q ≤ α. A table of 31 rows would star ~31·α rows by chance on the CI alone.
  double p_value = std::numeric_limits<double>::quiet_NaN();
  double q_value = std::numeric_limits<double>::quiet_NaN();
  bool significant = false;
};

struct MedianTable {
  std::string title;         // "mmap_lock Acquisitions And Wait Time"
  std::string first_column;  // "Metric", "Range (us)"
  std::string unit;          // "round" or "second"
  std::vector<MedianTableRow> rows;
};

// The three (or four) tables, or none when no run on either side traced mmap_lock waits.
std::vector<MedianTable> LockWaitTables(const std::vector<RunCounters>& baseline,
                                        const std::vector<RunCounters>& candidate, bool paired,
                                        const stats::CompareOptions& options);

}  // namespace faultline::controller

#pragma once
// Counters in the A/B statistics: why a kernel is faster, beside how much. Every counter a
// run recorded (vmstat.*, memcg.*, psi.*, rusage.*, perf.*, helper threads' *_rounds) is
// normalised per round of the benchmark (and per measured second), and kernel B's runs are
// compared with kernel A's like throughput is (statistics.h): Hodges–Lehmann ratio, exact
// CI, two-sided p, paired by repetition when the throughput comparison is paired. The
// counters of one comparison form their own Benjamini–Hochberg family (separate from the
// throughput cells): q ≤ α marks a significant change.
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/profile_names.h"
#include "stats/statistics.h"

namespace faultline::controller {

// One run's counters as stored (a zero delta is not stored: a missing counter is 0).
struct RunCounters {
  int repetition = 0;
  double rounds = 0;   // completed rounds over the measured interval
  double seconds = 0;  // measured seconds
  std::map<std::string, double> values;
};

struct CounterComparison {
  std::string name;
  int n_a = 0;  // runs per side
  int n_b = 0;
  // "round", or "second" when a run completed too few rounds to divide by.
  std::string unit = "round";
  double median_a = 0;  // per unit
  double median_b = 0;
  double median_a_per_second = 0;
  double median_b_per_second = 0;
  // Hodges–Lehmann B/A of the per-unit values and its CI; NaN when not comparable, or when
  // some run of either side counted 0 (a ratio with a zero in it is a clamp, not a change):
  // then the difference B − A per unit and its CI instead (NaN otherwise).
  double ratio = 0;
  double ci_low = 0;
  double ci_high = 0;
  double difference = 0;
  double difference_low = 0;
  double difference_high = 0;
  double p_value = 1;  // two-sided
  double q_value = 1;  // BH across this comparison's counters
  bool paired = false;
  bool significant = false;  // q ≤ α
  // "baseline" or "candidate": the counter is zero (or absent on that kernel) in every run
  // of the other side. No ratio then; never significant, listed apart.
  std::string only_on;
};

// True for the counters that count work (compared per round); false for levels and
// descriptions of the run (memcg.peak_bytes, measured_elapsed_seconds, rounds_per_thread_*,
// ns_per_iteration, ...).
bool IsComparableCounter(std::string_view name);
using faultline::IsFrameCounter;  // profile.total.<frame>, profile.self.<frame>

// Fewer rounds than this in any run and counters are compared per second instead.
inline constexpr double kMinRoundsPerRunForCounters = 5;

// A run's counter (0 when it has none: a zero delta is not stored), and the same per round,
// or per measured second (NaN when the run has neither).
double CounterValue(const RunCounters& run, const std::string& name);
double CounterPerUnit(const RunCounters& run, const std::string& name, bool per_second);

// The runs of a and b that form pairs (same repetition on both sides), in repetition order.
void PairByRepetition(const std::vector<RunCounters>& a, const std::vector<RunCounters>& b,
                      std::vector<RunCounters>* paired_a, std::vector<RunCounters>* paired_b);

// True when some run completed fewer than kMinRoundsPerRunForCounters rounds: counters are
// then compared per measured second.
bool CountersPerSecond(const std::vector<RunCounters>& a, const std::vector<RunCounters>& b);

// Compares every comparable counter seen in any run of a (baseline) or b (candidate).
// paired: pair runs by repetition (only repetitions present on both sides are used).
// Ordered: significant ratios first, largest first by the end of their CI nearest ×1 (the
// least change the data allow: a wide interval of a few runs does not lead), then the
// significant differences by q, then the rest by q, then the one-sided ones by name.
// q: Benjamini-Hochberg within a family, the frames' (IsFrameCounter) or the other counters'.
std::vector<CounterComparison> CompareCounters(const std::vector<RunCounters>& a,
                                               const std::vector<RunCounters>& b, bool paired,
                                               const stats::CompareOptions& options);

}  // namespace faultline::controller

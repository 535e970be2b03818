#pragma once
// Simulated bisections (docs/bisect.md, "Simulation"): the engine on a fake builder and a
// noisy fake board, next to a plain git bisect on the median of 3 runs (LKP's "at least
// 3 runs") over the same simulated histories. No kernels, no jobs: milliseconds each.
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "bisect/engine.h"

namespace faultline::bisect {

// A line of commits: index 0 good, `commits - 1` bad. From `culprit` on, the metric is
// multiplied by (1 + effect). Each run's value is exp(ln 1000 + ln(1 + effect if bad)
// + drift_per_run · (runs so far) + N(0, noise)): `noise` is the run-to-run spread.
// Commits in `broken` do not build. A revert of the culprit on the bad end removes the
// effect.
struct History {
  int commits = 65;  // the good end and 64 commits after it
  int culprit = 0;
  double effect = -0.05;
  double noise = 0.10;
  double drift_per_run = 0;
  std::vector<int> broken;
};

struct Scenario {
  std::string name;
  int commits = 65;
  double effect = -0.05;  // 0: good and bad do not differ (the endpoints should say so)
  double noise = 0.10;
  double drift_per_run = 0;
  int broken = 0;  // commits that do not build, drawn anew for each history
};

// One bisection's result.
struct Outcome {
  bool failed = false;
  bool differ = false;          // the endpoints said good and bad differ
  int endpoint_pairs = 0;       // pairs the endpoints took to decide
  int named = -1;               // the culprit named (-1: none, or only a candidate set)
  std::vector<int> candidates;  // skipped commits left a set
  int steps = 0;                // commits tested between the endpoints (built or not)
  int runs = 0;                 // benchmark runs
  Mark confirmation = Mark::kUntested;
  Mark revert = Mark::kUntested;
};

struct Summary {
  int bisections = 0;
  int wrong = 0;      // named a culprit, and not the true one
  int ambiguous = 0;  // a set of candidates (holding the true one) instead of one commit
  int missed = 0;     // a set without the true one, or failed
  int confirmed = 0;  // the named culprit confirmed against its parent
  double mean_steps = 0;
  int max_steps = 0;
  double mean_runs = 0;
  int differ = 0;  // the endpoints said good and bad differ (for an effect of 0: wrongly)
  double mean_endpoint_pairs = 0;
  int max_endpoint_pairs = 0;
};

// A history for `scenario`: culprit and broken commits drawn from `rng` (never an end,
// never the culprit).
History DrawHistory(const Scenario& scenario, std::mt19937_64& rng);

// `endpoints_only`: stops once the endpoints decided (differ or not).
Outcome RunEngine(const History& history, const Options& options, std::mt19937_64& rng,
                  bool endpoints_only = false);
// git bisect on the median of `runs` runs per commit (the ends measured first, the
// threshold half way between their medians).
Outcome RunMedianOf(const History& history, int runs, std::mt19937_64& rng);

// `count` histories drawn from `seed`; both methods see the same histories and the same
// noise stream seeds.
struct Comparison {
  Summary engine;
  Summary median_of_3;
  // The plain bisection given the engine's budget: the median of as many runs per commit as
  // the engine used per measured commit on average (its mean runs / (steps + 2)).
  Summary same_budget;
  int same_budget_runs = 0;
};
Comparison Simulate(const Scenario& scenario, const Options& options, int count, uint64_t seed);

// The engine's endpoints only, on the histories and noise streams Simulate draws from
// `seed`: how often good and bad are said to differ, and after how many pairs. Fast (no
// steps), so thousands of bisections of a scenario with no effect fit in a unit test.
Summary SimulateEndpoints(const Scenario& scenario, const Options& options, int count,
                          uint64_t seed);

}  // namespace faultline::bisect

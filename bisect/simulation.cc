#include "bisect/simulation.h"

#include <algorithm>
#include <cmath>
#include <utility>

namespace faultline::bisect {
namespace {

// Box–Muller over the generator's raw bits: the same numbers with every standard library
// (std::normal_distribution's algorithm is the library's choice).
double Gaussian(std::mt19937_64& rng) {
  constexpr double kTwoPi = 6.283185307179586;
  const double u1 = (static_cast<double>(rng() >> 11) + 0.5) * 0x1.0p-53;
  const double u2 = (static_cast<double>(rng() >> 11) + 0.5) * 0x1.0p-53;
  return std::sqrt(-2 * std::log(u1)) * std::cos(kTwoPi * u2);
}

int Uniform(std::mt19937_64& rng, int low, int high) {  // [low, high]
  return low + static_cast<int>(rng() % static_cast<uint64_t>(high - low + 1));
}

// The fake board: every run advances its clock, so drift is a function of board time.
class Board {
 public:
  Board(const History& history, std::mt19937_64& rng) : history_(history), rng_(rng) {}

  // One run of commit `index`; `reverted`: the bad end with the culprit reverted.
  double Run(int index, bool reverted = false) {
    double log_value = std::log(1000.0) + history_.drift_per_run * runs_;
    if (index >= history_.culprit && !reverted) log_value += std::log1p(history_.effect);
    log_value += history_.noise * Gaussian(rng_);
    ++runs_;
    return std::exp(log_value);
  }
  int runs() const { return runs_; }

 private:
  const History& history_;
  std::mt19937_64& rng_;
  int runs_ = 0;
};

bool IsBroken(const History& history, int index) {
  return std::find(history.broken.begin(), history.broken.end(), index) != history.broken.end();
}

double MedianOfRuns(Board& board, int index, int runs) {
  std::vector<double> v;
  for (int i = 0; i < runs; ++i) v.push_back(board.Run(index));
  std::sort(v.begin(), v.end());
  return runs % 2 == 1 ? v[runs / 2] : (v[runs / 2 - 1] + v[runs / 2]) / 2;
}

void Count(Summary* summary, const History& history, const Outcome& outcome) {
  ++summary->bisections;
  summary->mean_steps += outcome.steps;
  summary->max_steps = std::max(summary->max_steps, outcome.steps);
  summary->mean_runs += outcome.runs;
  summary->differ += outcome.differ ? 1 : 0;
  summary->mean_endpoint_pairs += outcome.endpoint_pairs;
  summary->max_endpoint_pairs = std::max(summary->max_endpoint_pairs, outcome.endpoint_pairs);
  if (outcome.named >= 0) {
    if (outcome.named != history.culprit) ++summary->wrong;
    if (outcome.confirmation == Mark::kBad) ++summary->confirmed;
  } else if (!outcome.failed && std::find(outcome.candidates.begin(), outcome.candidates.end(),
                                          history.culprit) != outcome.candidates.end()) {
    ++summary->ambiguous;
  } else {
    ++summary->missed;
  }
}

void Finish(Summary* summary) {
  if (summary->bisections == 0) return;
  summary->mean_steps /= summary->bisections;
  summary->mean_runs /= summary->bisections;
  summary->mean_endpoint_pairs /= summary->bisections;
}

// The histories of `count` bisections of `scenario` and each one's noise seed.
std::vector<std::pair<History, uint64_t>> DrawHistories(const Scenario& scenario, int count,
                                                        uint64_t seed) {
  std::mt19937_64 histories(seed);
  std::vector<std::pair<History, uint64_t>> drawn;
  for (int i = 0; i < count; ++i) {
    History history = DrawHistory(scenario, histories);
    drawn.emplace_back(std::move(history), histories());
  }
  return drawn;
}

}  // namespace

History DrawHistory(const Scenario& scenario, std::mt19937_64& rng) {
  History h;
  h.commits = scenario.commits;
  h.effect = scenario.effect;
  h.noise = scenario.noise;
  h.drift_per_run = scenario.drift_per_run;
  h.culprit = Uniform(rng, 1, scenario.commits - 1);
  while (static_cast<int>(h.broken.size()) < scenario.broken && scenario.commits > 3) {
    const int b = Uniform(rng, 1, scenario.commits - 2);
    if (b != h.culprit && !IsBroken(h, b)) h.broken.push_back(b);
  }
  return h;
}

Outcome RunEngine(const History& history, const Options& options, std::mt19937_64& rng,
                  bool endpoints_only) {
  Board board(history, rng);
  State state = Start(history.commits);
  Outcome out;
  while (auto request = Next(state, options)) {
    if (endpoints_only && request->role != Role::kEndpoints) break;
    const bool reverted = request->role == Role::kRevert;
    if (!reverted && IsBroken(history, request->candidate)) {
      MarkBroken(&state, options, "does not build");
      continue;
    }
    std::vector<Pair> pairs;
    for (int i = 0; i < request->pairs; ++i) {
      Pair p;
      p.reference = board.Run(request->reference);
      p.candidate = board.Run(request->candidate, reverted);
      if (request->with_bad) p.bad = board.Run(history.commits - 1);
      pairs.push_back(p);
    }
    AddPairs(&state, options, pairs);
  }
  for (const auto& step : state.steps) {
    out.steps += step.role == Role::kStep ? 1 : 0;
    if (step.role != Role::kEndpoints) continue;
    out.differ = step.outcome == Mark::kBad;
    out.endpoint_pairs = static_cast<int>(step.pairs.size());
  }
  out.failed = state.phase == Phase::kFailed;
  out.named = state.result.culprit;
  out.candidates = state.result.candidates;
  out.confirmation = state.result.confirmation;
  out.revert = state.result.revert;
  out.runs = board.runs();
  return out;
}

Outcome RunMedianOf(const History& history, int runs, std::mt19937_64& rng) {
  Board board(history, rng);
  Outcome out;
  const double good = std::log(MedianOfRuns(board, 0, runs));
  const double bad = std::log(MedianOfRuns(board, history.commits - 1, runs));
  const double threshold = (good + bad) / 2;
  const bool bad_is_lower = bad < good;
  int lo = 0, hi = history.commits - 1;
  std::vector<bool> skipped(history.commits, false);
  while (true) {
    // git bisect: the midpoint, or the testable commit nearest to it.
    const double middle = (lo + hi) / 2.0;
    int pick = -1;
    for (int i = lo + 1; i < hi; ++i) {
      if (skipped[i]) continue;
      if (pick < 0 || std::abs(i - middle) < std::abs(pick - middle)) pick = i;
    }
    if (pick < 0) break;
    ++out.steps;
    if (IsBroken(history, pick)) {
      skipped[pick] = true;
      continue;
    }
    const double value = std::log(MedianOfRuns(board, pick, runs));
    const bool looks_bad = bad_is_lower ? value < threshold : value > threshold;
    (looks_bad ? hi : lo) = pick;
  }
  for (int i = lo + 1; i <= hi; ++i) out.candidates.push_back(i);
  if (out.candidates.size() == 1) out.named = hi;
  out.runs = board.runs();
  return out;
}

Comparison Simulate(const Scenario& scenario, const Options& options, int count, uint64_t seed) {
  Comparison c;
  const auto drawn = DrawHistories(scenario, count, seed);
  for (const auto& [history, noise_seed] : drawn) {
    std::mt19937_64 engine_noise(noise_seed);
    Count(&c.engine, history, RunEngine(history, options, engine_noise));
    std::mt19937_64 plain_noise(noise_seed);
    Count(&c.median_of_3, history, RunMedianOf(history, 3, plain_noise));
  }
  Finish(&c.engine);
  Finish(&c.median_of_3);
  c.same_budget_runs =
      std::max(3, static_cast<int>(std::lround(c.engine.mean_runs / (c.engine.mean_steps + 2))));
  for (const auto& [history, noise_seed] : drawn) {
    std::mt19937_64 plain_noise(noise_seed);
    Count(&c.same_budget, history, RunMedianOf(history, c.same_budget_runs, plain_noise));
  }
  Finish(&c.same_budget);
  return c;
}

Summary SimulateEndpoints(const Scenario& scenario, const Options& options, int count,
                          uint64_t seed) {
  Summary s;
  for (const auto& [history, noise_seed] : DrawHistories(scenario, count, seed)) {
    std::mt19937_64 noise(noise_seed);
    Count(&s, history, RunEngine(history, options, noise, /*endpoints_only=*/true));
  }
  Finish(&s);
  return s;
}

}  // namespace faultline::bisect

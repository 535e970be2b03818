#include "bisect/engine.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

#include "stats/changepoint.h"
#include "stats/statistics.h"

namespace faultline::bisect {
namespace {

// Student's t quantile by the Cornish–Fisher expansion around the normal one (Abramowitz
// & Stegun 26.7.5): within 1% of the exact value from 3 degrees of freedom up, and
// larger than the normal quantile, so a small sample's interval is never too narrow.
double TQuantile(double p, int df) {
  const double z = stats::NormalQuantile(p);
  if (df <= 0) return std::numeric_limits<double>::infinity();
  const double v = df;
  const double z3 = z * z * z, z5 = z3 * z * z, z7 = z5 * z * z, z9 = z7 * z * z;
  return z + (z3 + z) / (4 * v) + (5 * z5 + 16 * z3 + 3 * z) / (96 * v * v) +
         (3 * z7 + 19 * z5 + 17 * z3 - 15 * z) / (384 * v * v * v) +
         (79 * z9 + 776 * z7 + 1482 * z5 - 1920 * z3 - 945 * z) / (92160 * v * v * v * v);
}

// Student's t quantile by inverting the exact two-sided tail (the incomplete beta function):
// for the endpoints' corrected levels, far in the tail (1 − 0.01/16 at 3 degrees of
// freedom), where the expansion above is not to be trusted. Rounded up, so never narrow.
double ExactTQuantile(double p, int df) {
  if (df <= 0 || p >= 1) return std::numeric_limits<double>::infinity();
  const double tail = 2 * (1 - p);  // P(|T| ≥ t)
  double low = 0, high = 1;
  while (stats::StudentTwoSidedP(high, df) > tail && high < 1e12) {
    low = high;
    high *= 2;
  }
  for (int i = 0; i < 200 && high - low > 1e-10 * high; ++i) {
    const double mid = (low + high) / 2;
    (stats::StudentTwoSidedP(mid, df) > tail ? low : high) = mid;
  }
  return high;
}

struct Moments {
  int n = 0;
  double mean = 0;
  double ss = 0;  // sum of squared deviations from the mean
};

double LogOf(double v) {
  return std::log(std::max(v, stats::kMinThroughput));
}

// What a step's SPRT reads from one repetition: a triple's z or a pair's log ratio.
double Statistic(const Step& step, const Pair& p) {
  if (!step.with_bad) return LogRatio(p);
  return LogOf(p.candidate) - (LogOf(p.reference) + LogOf(p.bad)) / 2;
}

// Welford's update.
void Accumulate(Moments* m, double x) {
  if (!std::isfinite(x)) return;
  ++m->n;
  const double delta = x - m->mean;
  m->mean += delta / m->n;
  m->ss += delta * (x - m->mean);
}

template <typename F>
Moments MomentsOf(const std::vector<Pair>& pairs, F value) {
  Moments m;
  for (const auto& p : pairs) Accumulate(&m, value(p));
  return m;
}

Step* OpenStep(State* state) {
  if (state->steps.empty() || state->steps.back().outcome != Mark::kUntested) return nullptr;
  return &state->steps.back();
}

void Fail(State* state, std::string why) {
  state->phase = Phase::kFailed;
  state->failure = std::move(why);
}

void OpenRevertOrFinish(State* state, const Options& options) {
  if (options.revert && state->result.culprit >= 0) {
    state->phase = Phase::kReverting;
    state->steps.push_back(Step{
        .role = Role::kRevert, .candidate = state->commits - 1, .reference = 0, .with_bad = true});
    return;
  }
  state->phase = Phase::kDone;
}

void OpenConfirmOrFinish(State* state, const Options& options) {
  const int culprit = state->result.culprit;
  if (options.confirm && culprit > 0) {
    state->phase = Phase::kConfirming;
    state->steps.push_back(
        Step{.role = Role::kConfirm, .candidate = culprit, .reference = culprit - 1});
    return;
  }
  OpenRevertOrFinish(state, options);
}

// The next commit to test inside the range left, or the result when none is left.
void OpenNextStep(State* state, const Options& options) {
  const Range range = RangeLeft(*state);
  if (range.untested == 0) {
    for (int i = range.good + 1; i <= range.bad; ++i) state->result.candidates.push_back(i);
    if (state->result.candidates.size() == 1) {
      state->result.culprit = range.bad;
      OpenConfirmOrFinish(state, options);
    } else {
      state->phase = Phase::kDone;  // only skipped commits left: any of them, or the bad one
    }
    return;
  }
  // The untested commit nearest the middle (the lower one on a tie), as git bisect picks
  // the nearest testable commit when the midpoint is skipped.
  const double middle = (range.good + range.bad) / 2.0;
  int best = -1;
  for (int i = range.good + 1; i < range.bad; ++i) {
    if (state->marks[i] != Mark::kUntested) continue;
    if (best < 0 || std::abs(i - middle) < std::abs(best - middle)) best = i;
  }
  state->phase = Phase::kBisecting;
  state->steps.push_back(
      Step{.role = Role::kStep, .candidate = best, .reference = 0, .with_bad = true});
}

// How many of the endpoints' looks `pairs` pairs have reached.
int LooksReached(const std::vector<int>& looks, int pairs) {
  return static_cast<int>(std::upper_bound(looks.begin(), looks.end(), pairs) - looks.begin());
}

// The endpoints' group-sequential test, once `before` pairs became step->pairs.size(): it
// decides only when that passed a look (EndpointLooks), each look's CI at level 1 − α/K.
// Only then is the chance of "they differ" for ends that do not differ at most α over the
// whole sequence (a test at 1 − α every block says so in 12% of such bisections at 512
// pairs); the looks are few because they double.
void EvaluateEndpoints(State* state, const Options& options, Step* step, int before) {
  const std::vector<int> looks = EndpointLooks(options);
  const int pairs = static_cast<int>(step->pairs.size());
  if (LooksReached(looks, pairs) == LooksReached(looks, before)) return;
  const bool last = pairs >= looks.back();
  const Moments m = MomentsOf(step->pairs, LogRatio);
  if (m.n < 2) {
    if (last) Fail(state, absl::StrFormat("good and bad gave no ratio in %d pairs", pairs));
    return;
  }
  const int k = static_cast<int>(looks.size());
  const double alpha = 1 - options.endpoint_confidence;
  const double sd = std::sqrt(m.ss / (m.n - 1));
  const double t = ExactTQuantile(1 - alpha / k / 2, m.n - 1);
  const double half = t * sd / std::sqrt(m.n);
  const bool differs = std::abs(m.mean) > half;
  const bool precise = half <= options.endpoint_precision * std::abs(m.mean);
  const double bound = std::log1p(options.min_effect);
  const bool inside = std::abs(m.mean) + half < bound;  // the CI within ±min_effect
  // "bad/good = 1.0012, 99% CI [0.9852, 1.0174] (corrected for 8 looks) over 64 pairs"
  const std::string measured = absl::StrFormat(
      "bad/good = %.4f, %g%% CI [%.4f, %.4f] (corrected for %d looks) over %d pairs",
      std::exp(m.mean), options.endpoint_confidence * 100, std::exp(m.mean - half),
      std::exp(m.mean + half), k, m.n);
  const std::string within = absl::StrFormat("±%g%%", options.min_effect * 100);
  if (differs && (precise || last)) {
    state->effect = m.mean;
    state->effect_low = m.mean - half;
    state->effect_high = m.mean + half;
    step->outcome = Mark::kBad;
    const char* what = precise ? "different: " : "different (CI wider than asked, last look): ";
    step->note = absl::StrCat(what, measured);
    state->marks.front() = Mark::kGood;
    state->marks.back() = Mark::kBad;
    OpenNextStep(state, options);
    return;
  }
  if (differs || !(inside || last)) return;  // not yet precise, or not yet inside ±min_effect
  if (inside) {
    Fail(state, absl::StrCat("good and bad do not differ: ", measured, ", inside ", within,
                             "; nothing to bisect"));
  } else {
    Fail(state, absl::StrCat("good and bad do not differ measurably: ", measured,
                             ", the most asked; a change beyond ", within,
                             " is not ruled out (more pairs: --max-pairs); nothing to bisect"));
  }
  step->outcome = Mark::kGood;
  step->note = inside ? "not different (inside " + within + ")" : "not different";
}

// Wald's SPRT between "like good" and "like bad": for a triple's z, −|d|/2 against +|d|/2;
// for a pair's log ratio (confirming), 0 against |d| (signs turned so that bad is up).
void EvaluateSprt(State* state, const Options& options, Step* step) {
  const EffectEstimate estimate = EstimateEffect(*state);
  const double d = estimate.effect;
  const double sign = d < 0 ? -1 : 1;
  // The SPRT's alternative: |d| less its 99% margin (at least a quarter of |d|). An
  // alternative larger than the truth makes the test overconfident, errors beyond α; a
  // smaller one only costs repetitions. The margin shrinks as the triples add ln(bad/good).
  const double run_sigma = std::max(estimate.run_sigma, std::abs(d) / 10);
  const int n_effect = estimate.samples;
  const double margin = n_effect > 1
                            ? TQuantile(0.995, n_effect - 1) * run_sigma * std::sqrt(2.0 / n_effect)
                            : std::abs(d);
  const double size = std::max(std::abs(d) - margin, std::abs(d) / 4);
  const double sigma = run_sigma * std::sqrt(step->with_bad ? 1.5 : 2.0);
  const double good = step->with_bad ? -size / 2 : 0;  // the two hypotheses' means
  const double bad = good + size;
  double llr = 0;
  for (const auto& p : step->pairs) {
    // Bounded influence of one wild run: clipped 3σ beyond the hypotheses.
    const double x = std::clamp(sign * Statistic(*step, p), good - 3 * sigma, bad + 3 * sigma);
    llr += size / (sigma * sigma) * (x - (good + bad) / 2);
  }
  step->llr = llr;
  const int n = static_cast<int>(step->pairs.size());
  const double bound = std::log((1 - options.error) / options.error);
  Mark outcome = Mark::kUntested;
  if (n >= options.min_pairs && llr >= bound) outcome = Mark::kBad;
  if (n >= options.min_pairs && llr <= -bound) outcome = Mark::kGood;
  if (outcome == Mark::kUntested && n >= options.max_pairs) outcome = Mark::kUnknown;
  if (outcome == Mark::kUntested) return;
  step->outcome = outcome;
  step->note =
      outcome == Mark::kUnknown
          ? absl::StrFormat("no decision after %d pairs (LLR %.2f, bounds ±%.2f)", n, llr, bound)
          : absl::StrFormat("LLR %.2f crossed %s%.2f", llr, outcome == Mark::kBad ? "+" : "-",
                            bound);
  switch (step->role) {
    case Role::kStep:
      state->marks[step->candidate] = outcome;
      OpenNextStep(state, options);
      return;
    case Role::kConfirm:
      state->result.confirmation = outcome;
      OpenRevertOrFinish(state, options);
      return;
    case Role::kRevert:
      state->result.revert = outcome;
      state->phase = Phase::kDone;
      return;
    case Role::kEndpoints:
      return;
  }
}

}  // namespace

std::string_view ToString(Role role) {
  switch (role) {
    case Role::kEndpoints:
      return "endpoints";
    case Role::kStep:
      return "step";
    case Role::kConfirm:
      return "confirm";
    case Role::kRevert:
      return "revert";
  }
  return "?";
}

std::string_view ToString(Mark mark) {
  switch (mark) {
    case Mark::kUntested:
      return "untested";
    case Mark::kGood:
      return "good";
    case Mark::kBad:
      return "bad";
    case Mark::kUnknown:
      return "unknown";
    case Mark::kBroken:
      return "broken";
  }
  return "?";
}

std::string_view ToString(Phase phase) {
  switch (phase) {
    case Phase::kEndpoints:
      return "endpoints";
    case Phase::kBisecting:
      return "bisecting";
    case Phase::kConfirming:
      return "confirming";
    case Phase::kReverting:
      return "reverting";
    case Phase::kDone:
      return "done";
    case Phase::kFailed:
      return "failed";
  }
  return "?";
}

double LogRatio(const Pair& pair) {
  return std::log(std::max(pair.candidate, stats::kMinThroughput)) -
         std::log(std::max(pair.reference, stats::kMinThroughput));
}

State Start(int commits) {
  State state;
  state.commits = commits;
  state.marks.assign(std::max(commits, 0), Mark::kUntested);
  if (commits < 2) {
    Fail(&state, "a bisection needs a good and a bad commit");
    return state;
  }
  state.steps.push_back(Step{.role = Role::kEndpoints, .candidate = commits - 1, .reference = 0});
  return state;
}

std::vector<int> EndpointLooks(const Options& options) {
  const int first = std::max(2, options.endpoint_min_pairs);
  const int last = std::max(first, options.endpoint_max_pairs);
  std::vector<int> looks;
  for (int n = first; n < last; n *= 2) looks.push_back(n);
  looks.push_back(last);
  return looks;
}

std::optional<Request> Next(const State& state, const Options& options) {
  if (state.phase == Phase::kDone || state.phase == Phase::kFailed) return std::nullopt;
  if (state.steps.empty() || state.steps.back().outcome != Mark::kUntested) return std::nullopt;
  const Step& step = state.steps.back();
  const int measured = static_cast<int>(step.pairs.size());
  int cap = options.max_pairs;
  if (step.role == Role::kEndpoints) {  // up to the next look, where the test decides
    const std::vector<int> looks = EndpointLooks(options);
    const auto next = std::upper_bound(looks.begin(), looks.end(), measured);
    cap = next == looks.end() ? looks.back() : *next;
  }
  const int left = cap - measured;
  return Request{.role = step.role,
                 .candidate = step.candidate,
                 .reference = step.reference,
                 .with_bad = step.with_bad,
                 .pairs = std::max(1, std::min(options.block, left))};
}

void AddPairs(State* state, const Options& options, const std::vector<Pair>& pairs) {
  Step* step = OpenStep(state);
  if (step == nullptr || pairs.empty()) return;
  const int before = static_cast<int>(step->pairs.size());
  step->pairs.insert(step->pairs.end(), pairs.begin(), pairs.end());
  if (step->role == Role::kEndpoints) {
    EvaluateEndpoints(state, options, step, before);
  } else {
    EvaluateSprt(state, options, step);
  }
}

void MarkBroken(State* state, const Options& options, const std::string& why, bool build_failed) {
  Step* step = OpenStep(state);
  if (step == nullptr) return;
  step->outcome = Mark::kBroken;
  step->note = why;
  step->build_failed = build_failed;
  switch (step->role) {
    case Role::kEndpoints:
      Fail(state, "the good or the bad end cannot be measured: " + why);
      return;
    case Role::kStep:
      state->marks[step->candidate] = Mark::kBroken;
      OpenNextStep(state, options);
      return;
    case Role::kConfirm:
      state->result.confirmation = Mark::kBroken;
      OpenRevertOrFinish(state, options);
      return;
    case Role::kRevert:
      state->result.revert = Mark::kBroken;
      state->phase = Phase::kDone;
      return;
  }
}

Range RangeLeft(const State& state) {
  Range range{.good = 0, .bad = std::max(0, state.commits - 1)};
  for (int i = 0; i < state.commits; ++i) {
    if (state.marks[i] == Mark::kGood) range.good = std::max(range.good, i);
  }
  for (int i = state.commits - 1; i > range.good; --i) {
    if (state.marks[i] == Mark::kBad) range.bad = i;
  }
  for (int i = range.good + 1; i < range.bad; ++i) {
    if (state.marks[i] == Mark::kUntested) ++range.untested;
  }
  return range;
}

int StepsLeft(const State& state, const Options& options) {
  if (state.phase == Phase::kDone || state.phase == Phase::kFailed) return 0;
  const int extra = (options.confirm ? 1 : 0) + (options.revert ? 1 : 0);
  switch (state.phase) {
    case Phase::kConfirming:
      return extra;
    case Phase::kReverting:
      return 1;
    default:
      break;
  }
  const int untested = RangeLeft(state).untested;
  const int endpoints = state.phase == Phase::kEndpoints ? 1 : 0;
  return endpoints + static_cast<int>(std::ceil(std::log2(untested + 1.0))) + extra;
}

EffectEstimate EstimateEffect(const State& state) {
  // One pass, three logarithms a repetition: the simulation calls this after every block.
  Moments all;              // every ln(bad/good): d and its CI
  double variance_sum = 0;  // Σ SS / factor: each in units of one run's variance
  int df = 0;
  auto add = [&](const Moments& m, double factor) {
    if (m.n < 2) return;
    variance_sum += m.ss / factor;
    df += m.n - 1;
  };
  for (const auto& step : state.steps) {
    Moments statistic, effect;
    const bool has_effect = step.role == Role::kEndpoints || (step.with_bad && step.reference == 0);
    for (const auto& p : step.pairs) {
      const double r = LogOf(p.reference), c = LogOf(p.candidate);
      const double b = step.with_bad ? LogOf(p.bad) : 0;
      Accumulate(&statistic, step.with_bad ? c - (r + b) / 2 : c - r);
      if (!has_effect) continue;
      const double y = step.role == Role::kEndpoints ? c - r : b - r;
      if (!std::isfinite(y)) continue;
      Accumulate(&all, y);
      if (step.role != Role::kEndpoints) Accumulate(&effect, y);
    }
    add(statistic, step.with_bad ? 1.5 : 2.0);
    add(effect, 2.0);
  }
  EffectEstimate out{
      .effect = all.mean, .samples = all.n, .run_sigma = df > 0 ? std::sqrt(variance_sum / df) : 0};
  if (all.n >= 2) {
    const double half = TQuantile(0.995, all.n - 1) * std::sqrt(all.ss / (all.n - 1) / all.n);
    out.effect_low = all.mean - half;
    out.effect_high = all.mean + half;
  }
  return out;
}

}  // namespace faultline::bisect

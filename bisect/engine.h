#pragma once
// Bisection on a noisy metric (docs/bisect.md): which commit between a good and a bad ref
// moved a page-fault metric?
//
// The commits form a line: index 0 is the good end, index n-1 the bad end, every other
// index a commit between them in first-parent order. The engine never runs anything: it
// says what to measure next (a Request: a candidate against a reference, so many pairs),
// the caller measures (real jobs on a board, or a simulation) and gives back the pairs,
// and the engine decides. Its whole state is a plain value (State), so the controller
// keeps it in PostgreSQL and resumes after a restart.
//
// How it decides:
//   1. Endpoints: bad against good in interleaved pairs, a group-sequential test of the mean
//      log ratio: at each look (4, 8, 16, ... pairs, then endpoint_max_pairs) its CI at
//      level 1 − α/K for K looks. They differ when it excludes 0 (and is narrower than
//      ±precision·|effect|); they do not when it holds 0 and lies inside ±min_effect, or
//      still holds 0 at endpoint_max_pairs: then the bisection fails, nothing to bisect.
//   2. Steps: the midpoint of the range left, measured in interleaved triples with both
//      ends (good, candidate, bad: one repetition of each). Per triple
//      z = ln candidate − (ln good + ln bad)/2 is −d/2 for a commit like good and +d/2 for
//      one like bad, where d = ln(bad/good): the decision boundary is the middle of the
//      effect measured in the same blocks, so neither drift of the board nor an endpoint
//      estimate that came out high or low moves it. A sequential probability ratio test
//      (Wald) on z decides, error rates α = β = `error`: like-good, like-bad, or unknown
//      after max_pairs (Pinpoint's three outcomes). An unknown commit is skipped as
//      `git bisect skip` does, and so is one that does not build or boot.
//   3. Confirm: the culprit against its parent in pairs (an SPRT between 0 and d); then,
//      when asked, the bad end with the culprit reverted, in triples as a step
//      (like-good expected).
// d is the mean of every ln(bad/good) measured (the endpoints' pairs and every triple's):
// under the SPRT's stopping it stays unbiased, since z and ln(bad/good) are uncorrelated.
// One run's spread σ is pooled over every measurement, each around its own mean.
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace faultline::bisect {

struct Options {
  double error = 0.002;  // α = β of each step's SPRT
  int block = 4;         // pairs measured per request
  int min_pairs = 4;     // a step decides only after this many pairs
  int max_pairs = 512;   // per step: then the commit is unknown (skipped)
  // The endpoints' sequential test (EndpointLooks): it looks at endpoint_min_pairs pairs,
  // then at twice as many each time, and at endpoint_max_pairs last; each look's CI is at
  // level 1 − α/K for K looks (Bonferroni), α = 1 − endpoint_confidence, so "they differ"
  // is said of ends that do not differ with probability at most α over all looks together.
  int endpoint_min_pairs = 4;
  int endpoint_max_pairs = 512;  // then good and bad are declared not different
  double endpoint_confidence = 0.99;
  double endpoint_precision = 1;  // endpoints' CI half-width ≤ this × |d|
  // The smallest change worth bisecting, as |bad/good − 1|: the endpoints stop early as
  // "not different" once their corrected CI holds 1 and lies inside ±this (in logs,
  // |ln(bad/good)| < ln(1 + this)).
  double min_effect = 0.03;
  bool confirm = true;  // culprit against its parent
  bool revert = true;   // the bad end with the culprit reverted
};

enum class Role { kEndpoints, kStep, kConfirm, kRevert };
std::string_view ToString(Role role);

// What a commit turned out to be.
enum class Mark { kUntested, kGood, kBad, kUnknown, kBroken };
std::string_view ToString(Mark mark);

enum class Phase { kEndpoints, kBisecting, kConfirming, kReverting, kDone, kFailed };
std::string_view ToString(Phase phase);

// One repetition: the reference's value and the candidate's; `bad`, the bad end's, in the
// triples of steps and reverts (NaN in pairs).
struct Pair {
  double reference = 0;
  double candidate = 0;
  double bad = std::numeric_limits<double>::quiet_NaN();
};

// One measurement: a candidate commit against a reference commit.
struct Step {
  Role role = Role::kStep;
  int candidate = 0;      // index into the commits; kRevert: the bad end with the culprit reverted
  int reference = 0;      // the good end, or the culprit's parent when confirming
  bool with_bad = false;  // triples: the bad end measured in every repetition too
  std::vector<Pair> pairs;
  Mark outcome = Mark::kUntested;  // kUntested while open
  double llr = 0;                  // SPRT log likelihood ratio (bad over good) at the end
  std::string note;                // why it was broken, or what decided
  bool build_failed = false;       // kBroken because its kernel did not build (not its runs)
  std::vector<int64_t> jobs;       // the caller's: what measured it (the controller's job ids)
};

struct Result {
  int culprit = -1;                     // index of the first bad commit (-1: not named)
  std::vector<int> candidates;          // when skipped commits leave several: all of them, in order
  Mark confirmation = Mark::kUntested;  // kBad: confirmed; kGood: the parent looks bad too
  Mark revert = Mark::kUntested;        // kGood: reverting it restores good; kBroken: no revert
};

struct State {
  int commits = 0;
  Phase phase = Phase::kEndpoints;
  std::vector<Mark> marks;  // per commit
  std::vector<Step> steps;  // the last one is open while phase is not done/failed
  double effect = 0;        // d: the endpoints' mean ln(bad/good) when they were decided
  double effect_low = 0;    // its CI (log), corrected for the looks (EndpointLooks)
  double effect_high = 0;
  Result result;
  std::string failure;  // phase kFailed: why
};

struct Request {
  Role role = Role::kStep;
  int candidate = 0;
  int reference = 0;
  bool with_bad = false;  // measure the bad end in each repetition as well
  int pairs = 0;          // repetitions
};

// A new bisection over `commits` (at least 2: good and bad).
State Start(int commits);

// What to measure now; nullopt once done or failed.
std::optional<Request> Next(const State& state, const Options& options);

// The open step's pairs came back: adds them and decides as far as they allow.
void AddPairs(State* state, const Options& options, const std::vector<Pair>& pairs);

// The open step's candidate (or reference) could not be built or booted (`build_failed`:
// its kernel's build failed, the caller knows it from the build, not from `why`'s words).
void MarkBroken(State* state, const Options& options, const std::string& why,
                bool build_failed = false);

// The range of commits still in question: (last good, first bad] as indices.
struct Range {
  int good = 0;
  int bad = 0;
  int untested = 0;  // commits inside it still to test
};
Range RangeLeft(const State& state);

// The endpoints' looks: the pair counts at which their test decides, in increasing order
// (endpoint_min_pairs, doubling, endpoint_max_pairs last). Each look's CI is at level
// 1 − α/size().
std::vector<int> EndpointLooks(const Options& options);

// Steps still expected: ceil(log2(untested + 1)) plus the confirmations to come.
int StepsLeft(const State& state, const Options& options);

// What the measurements so far say about the effect and the noise.
struct EffectEstimate {
  double effect = 0;  // d: the mean ln(bad/good) over the endpoints' pairs and every triple
  int samples = 0;    // how many ln(bad/good) went into it
  // The 99% CI of d from the same samples (Student's t on their spread around d; ±∞ below
  // 2 samples): what a display puts next to d.
  double effect_low = -std::numeric_limits<double>::infinity();
  double effect_high = std::numeric_limits<double>::infinity();
  // One run's spread (log), pooled over every step's statistics, each around its own mean
  // (a pair's log ratio has variance 2σ², a triple's z 1.5σ², its ln(bad/good) 2σ²).
  double run_sigma = 0;
};
EffectEstimate EstimateEffect(const State& state);

// ln(candidate/reference) of a pair, values clamped at 1e-9 as the A/B statistics do.
double LogRatio(const Pair& pair);

}  // namespace faultline::bisect

#pragma once
// Change points over a series' history of nightly run medians (docs/statistics.md, "History and
// change points"): E-divisive with a windowed split and a t-test merge, the way Apache Otava
// (formerly Hunter; Fleming et al., "Hunter: Using Change Point Detection to Hunt for Performance
// Regressions", ICPE 2023) does it. Our own code; no dependencies beyond the standard library.
//
//   split  Windows of `window` points, advancing by window/2 (or to the last change point
//          found in the window, whichever is further). In each window, E-divisive (Matteson &
//          James 2014, distance power 1): the split τ of a segment maximising
//            Q̂(X, Y) = 2/(n+m) Σ|x−y| − 2m/((n+m)(n−1)) Σ|x−x'| − 2n/((n+m)(m−1)) Σ|y−y'|
//          over X = [start, τ), Y = [τ, κ), κ ≤ segment end, is the candidate; it is kept when
//          the two-sided t-test (below) between [segment start, τ) and [τ, segment end) gives
//          p ≤ the first-pass threshold (10 × max_p_value below 0.05, as Otava does), and the
//          search then recurses into the pieces; the first candidate that fails ends the
//          window. The union over all windows is the set of weak change points.
//   merge  Every weak change point is re-tested against its neighbours (left segment from
//          the previous change point, right segment to the next). While any is weak, the
//          weakest is removed — the one with the largest p if some p > max_p_value (ties: the
//          smaller |relative change|), else the one with the smallest |relative change| if
//          that is < min_magnitude — and its two neighbours, whose segments just grew, are
//          re-tested. What remains has p ≤ max_p_value and |relative change| ≥ min_magnitude.
//
// The t-test. p = max(p of Welch's test, p of Student's pooled test), two-sided: a change
// must convince both. Each alone fails on short segments: Welch trusts a short segment's own
// variance, so two nights that happen to lie close together look like a certain shift (30
// points of 100 ± 1 against {102.4, 102.5}: Welch p ≈ 1e-13, Student 0.0016), and it put a
// change point in 4.9% of 100-point series of 2% noise (2000 seeds; 0.55% with the max);
// Student pools the variance, so a segment holding one collapsed night looks shifted (against
// {0.5, 100}: Student p ≈ 1e-5, Welch 0.5).
//
// Outliers. One collapsed night that recovers (e.g. a single 0.5 in a series around 100) is
// an outlier event, not a change point — not where it starts and not where it ends. The rule:
// every segment must hold at least `min_segment` (≥ 2) points. The split only looks at τ with
// min_segment points on both sides, and in the merge a change point with a shorter segment on
// either side counts as p = 1 and is merged away first. A lone point therefore can never be a
// segment of its own; it sits inside a longer segment whose variance it inflates, and Welch's
// half of the test (each side's own variance) does not call that segment's mean different.
// Measured: a single 0.5 at any of 9 positions (first to last) in 100 points of 100 ± 1%,
// 500 seeds each, gave no change point. Two or more consecutive collapsed nights can be
// reported; a collapse on the latest night is not a change point until later nights confirm
// it (the A/B collapse verdict and alert cover single runs).
// Because the split tests a candidate against the rest of its window's segment, short
// excursions that recover are hard to propose at all: at window 50, a −30% dip in 1% noise is
// found (as two change points) from about 6 nights on, not at 2–5 (measured, 100 seeds each).
// Nights down at the end of the history are found once there are about 4 of them.
//
// Differences from Otava, on purpose: max of Welch and Student (Otava: Student's test, fed
// population standard deviations); magnitude is |mean_after / mean_before − 1| (Otava takes
// the larger of the forward and backward relative change); min_segment (Otava: 1 point);
// neighbours on both sides are re-tested after a removal; no incremental mode (the whole
// history is analysed each time).
#include <cstddef>
#include <vector>

namespace faultline::stats {

struct ChangePointOptions {
  int window = 50;              // split window length, in points (raised to 2 × min_segment)
  double max_p_value = 0.001;   // a change point needs p ≤ this (two-sided, see The t-test)
  double min_magnitude = 0.02;  // ... and |mean_after / mean_before − 1| ≥ this
  int min_segment = 2;          // fewest points a segment may have (raised to 2)
};

struct ChangePoint {
  size_t index = 0;            // first point of the new segment (0 < index < series.size())
  double mean_before = 0;      // mean of the segment ending at index (from the previous one)
  double mean_after = 0;       // mean of the segment starting at index (to the next one)
  double relative_change = 0;  // mean_after / mean_before − 1 (0 when mean_before == 0)
  double p_value = 1;          // max of Welch's and Student's two-sided p between the segments
};

// The change points of `series` (values in time order), sorted by index. Empty when the series
// is shorter than 2 × min_segment or holds a non-finite value (callers drop those first).
std::vector<ChangePoint> DetectChangePoints(const std::vector<double>& series,
                                            const ChangePointOptions& options = {});

// ---- Building blocks (exposed for tests) ----

struct TTestResult {
  double t = 0;   // (mean_b − mean_a) / standard error
  double df = 0;  // degrees of freedom (Welch–Satterthwaite for Welch, n_a + n_b − 2 pooled)
  double p = 1;   // two-sided
};
// Welch's two-sample t-test. Each side needs ≥ 2 values (else p = 1). When both sides have
// zero variance, p = 0 if the means differ and 1 if they are equal.
TTestResult WelchTTest(const double* a, size_t n_a, const double* b, size_t n_b);

// Student's two-sample t-test with the pooled variance (df = n_a + n_b − 2; needs df ≥ 1).
// Constant sides: as WelchTTest.
TTestResult StudentTTest(const double* a, size_t n_a, const double* b, size_t n_b);

// Two-sided p-value of Student's t distribution with df (> 0, real) degrees of freedom:
// P(|T| ≥ |t|) = I_{df/(df+t²)}(df/2, ½).
double StudentTwoSidedP(double t, double df);

// Regularized incomplete beta function I_x(a, b), a, b > 0, x in [0, 1].
double RegularizedIncompleteBeta(double a, double b, double x);

// The E-divisive candidate in [begin, end) of `series`: the τ with begin + min_segment ≤ τ ≤
// end − min_segment maximising max over κ in (τ, end] of Q̂([begin, τ), [τ, κ)). Returns false
// when no τ fits.
bool EDivisiveCandidate(const std::vector<double>& series, size_t begin, size_t end,
                        size_t min_segment, size_t* tau, double* q_hat);

}  // namespace faultline::stats

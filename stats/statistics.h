#pragma once
// A/B statistics for one study (docs/statistics.md, "A/B statistics"): kernel B (candidate) vs
// kernel A (baseline), per matrix cell, on throughput samples (rounds per second, higher is
// better).
//
//   ratio     Hodges–Lehmann estimate of B/A: exp(median over all pairs of ln b_j − ln a_i).
//   CI        confidence interval of that shift by the classic order-statistic method (the
//             k-th smallest and k-th largest pairwise difference, k from the exact null
//             distribution of the Mann–Whitney U; normal approximation with tie and
//             continuity correction when a side has more than 20 samples), exponentiated.
//   p         one-sided p-values from the exact U distribution (conditional on ties, by a
//             DP over mid-ranks); normal approximation with tie correction above 20 per side.
//   q         Benjamini–Hochberg adjusted across the cells of a study, of the two-sided p
//             (2 × the one-sided p in the estimate's direction). The direction of a claim is
//             read from the data, so each claim is a two-sided test: adjusting the one-sided p
//             itself would let A/A noise through at up to 2α (measured: 1.1% at α = 1% with
//             10 runs per side, 1.3% with 5), breaking the A/A self-check.
//   verdict   collapse | improvement | regression | no-change | inconclusive (see Verdict).
//
// Pure C++: no protobuf, no database.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace faultline::stats {

// Samples larger than this per side use the normal approximation instead of exact tables.
inline constexpr int kExactLimitPerSide = 20;
// Throughputs at or below zero are clamped to this before taking logs. Collapsed runs
// (a kernel livelocking under pressure) report ~0 rounds/s, sometimes exactly 0, and
// ln(0) = −inf would turn every pairwise difference involving them into ±inf or NaN.
// The rank-based statistics only need the order, and the ratio of a collapsed side then
// comes out tiny, which is what it is.
inline constexpr double kMinThroughput = 1e-9;

struct CompareOptions {
  double alpha = 0.01;       // significance level of the BH-adjusted one-sided p
  double min_effect = 0.03;  // δ: smallest relative change that counts
  double confidence = 0.95;  // two-sided level of the ratio's confidence interval
};

enum class Verdict { kInconclusive, kNoChange, kImprovement, kRegression, kCollapse };
// "inconclusive", "no-change", "improvement", "regression", "collapse".
std::string_view ToString(Verdict verdict);

struct CellComparison {
  int n_a = 0;  // samples used per side (non-finite samples are ignored)
  int n_b = 0;
  double median_a = 0;  // of the samples as given (not clamped); 0 when a side is empty
  double median_b = 0;
  // Hodges–Lehmann estimate of B/A and its CI. NaN when a side has fewer than 2 samples.
  // ci_low = 0 and ci_high = +inf when the samples are too few for the confidence level
  // (e.g. 3 vs 3 at 95%: even the most extreme ordering has probability 1/20 > 2.5%).
  double ratio = 0;
  double ci_low = 0;
  double ci_high = 0;
  double p_improvement = 1;  // one-sided p for "B is faster than A"
  double p_regression = 1;   // one-sided p for "B is slower than A"
  double p_value = 1;        // the one in the estimate's direction (the smaller when ratio == 1)
  double q_value = 1;        // BH-adjusted min(1, 2·p_value) across the study (one cell: no BH)
  bool exact = true;         // exact distribution (false: normal approximation)
  bool max_b_below_min_a = false;  // every B sample is below every A sample
  bool paired = false;             // ComparePaired: n_a == n_b pairs, signed-rank statistics
  Verdict verdict = Verdict::kInconclusive;
};

// Compares one cell: a = baseline samples, b = candidate samples. q_value and the verdict
// are those of a one-cell study (q = min(1, 2·p)); ApplyStudyVerdicts() redoes both across
// a study.
CellComparison Compare(const std::vector<double>& a, const std::vector<double>& b,
                       const CompareOptions& options = {});

// Paired design (kernels alternating in blocks: the i-th A block and the i-th B block ran
// next to each other, so slow drift of the board hits both): a[i] and b[i] form pair i.
//   ratio  Hodges–Lehmann estimate of the paired shift: exp(median of the Walsh averages
//          (d_i + d_j)/2, i ≤ j, of d_i = ln b_i − ln a_i).
//   CI     the k-th smallest and k-th largest Walsh average, k from the exact null
//          distribution of the Wilcoxon signed-rank statistic W+ (tie-free), exponentiated.
//   p      one-sided, exact W+ distribution conditional on the tied |d| (mid-ranks, DP over
//          doubled ranks), zero differences dropped (Wilcoxon); normal approximation with tie
//          correction above kExactPairedLimit pairs.
// Pairs with a non-finite member are dropped. Fewer than 2 pairs: inconclusive, NaN ratio.
// The vectors must have equal length (the caller checks and names both counts).
inline constexpr int kExactPairedLimit = 60;
CellComparison ComparePaired(const std::vector<double>& a, const std::vector<double>& b,
                             const CompareOptions& options = {});

// The same comparison as a difference b − a instead of a ratio: for values that can be 0
// (counters a kernel hits in some runs only), where a ratio is ∞ or 0 and says nothing.
//   shift  Hodges–Lehmann estimate of b − a (unpaired: median of all b_j − a_i; paired: of
//          the Walsh averages of b_i − a_i), in the values' own unit.
//   CI     the same order statistics as Compare/ComparePaired; −∞/+∞ when the samples are
//          too few for the confidence level.
//   p      two-sided, the rank tests of Compare/ComparePaired on the values themselves.
// Fewer than 2 samples (pairs) a side: NaN shift and CI, p = 1.
struct DifferenceComparison {
  double shift = 0;
  double ci_low = 0;
  double ci_high = 0;
  double p_value = 1;  // two-sided
  bool paired = false;
};
DifferenceComparison CompareDifference(const std::vector<double>& a, const std::vector<double>& b,
                                       bool paired, const CompareOptions& options = {});

// Benjamini–Hochberg of the two-sided p across the study's cells (those with at least 2
// samples per side form the family), then the verdicts from the adjusted q-values.
void ApplyStudyVerdicts(std::vector<CellComparison>* cells, const CompareOptions& options = {});

// The verdict rule, given q_value:
//   collapse     max(B) < min(A) and ratio < 0.5 (needs no p-value)
//   improvement  q ≤ α and ratio ≥ 1 + δ;  regression  q ≤ α and ratio ≤ 1 − δ
//   no-change    [ci_low, ci_high] ⊆ [1 − δ, 1 + δ]
//   inconclusive otherwise, and always with fewer than 2 samples per side.
Verdict DecideVerdict(const CellComparison& cell, const CompareOptions& options);

// Adaptive repetitions: true while another A/B pair is worth running, i.e. fewer than
// max_pairs per side and the CI half-width (ci_high − ci_low) / 2, in units of the
// baseline, is above target_half_width. Collapses need no more pairs.
bool NeedsMorePairs(const CellComparison& cell, double target_half_width, int max_pairs);

// ---- Building blocks (exposed for tests) ----

// Number of orderings of n A's and m B's (no ties) with U = u, for u = 0..n·m, where U
// counts the (a, b) pairs with b > a. Sums to C(n+m, n). Standard recurrence
// c(n, m, u) = c(n − 1, m, u) + c(n, m − 1, u − n).
std::vector<double> MannWhitneyCounts(int n, int m);

// U of b over a: #{b_j > a_i} + ½ #{b_j == a_i}.
double MannWhitneyU(const std::vector<double>& a, const std::vector<double>& b);

struct OneSidedP {
  double improvement = 1;  // P(U ≥ u_observed): B stochastically larger
  double regression = 1;   // P(U ≤ u_observed): B stochastically smaller
};
// Exact permutation p-values, conditional on the tie pattern (mid-ranks; without ties the
// same as MannWhitneyCounts). Any size, but meant for ≤ kExactLimitPerSide per side.
OneSidedP ExactPValues(const std::vector<double>& a, const std::vector<double>& b);
// Normal approximation with tie-corrected variance and continuity correction.
OneSidedP NormalPValues(const std::vector<double>& a, const std::vector<double>& b);

// k of the order-statistic CI: the interval is [D_(k), D_(nm+1−k)] of the sorted pairwise
// differences (1-based). Exact: the largest k with P(U ≤ k − 1) ≤ (1 − confidence) / 2.
// Normal (used when n or m > kExactLimitPerSide): floor(nm/2 + ½ − z·sd), sd tie-corrected
// with tie_term = Σ(t³ − t) over the pooled tie groups. 0 means the CI is unbounded.
int ExactCiRank(int n, int m, double confidence);
int NormalCiRank(int n, int m, double confidence, double tie_term = 0);

// Sorted ln b_j − ln a_i over all pairs (after clamping at kMinThroughput).
std::vector<double> PairwiseLogDifferences(const std::vector<double>& a,
                                           const std::vector<double>& b);

// Benjamini–Hochberg step-up adjusted p-values, in the input order, capped at 1.
std::vector<double> BenjaminiHochberg(const std::vector<double>& p_values);

// Φ⁻¹ and Φ of the standard normal.
double NormalQuantile(double p);
double NormalCdf(double x);

double MedianOf(std::vector<double> values);  // 0 when empty

// The median of a sample and its distribution-free confidence interval: [x_(k), x_(n+1−k)]
// of the sorted sample (1-based), k the largest with P(Binomial(n, ½) < k) ≤ (1 − confidence)/2,
// so the interval covers the true median with at least `confidence` whatever the
// distribution. low and high are NaN when n is too small for any k (n < 6 at 95%).
// Non-finite values are ignored; an empty sample has median NaN.
struct MedianInterval {
  int n = 0;
  double median = 0;
  double low = 0;
  double high = 0;
};
MedianInterval MedianCi(std::vector<double> values, double confidence = 0.95);

}  // namespace faultline::stats

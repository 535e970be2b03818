#include "stats/statistics.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <utility>

namespace faultline::stats {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

double Clamp(double x) {
  return x > kMinThroughput ? x : kMinThroughput;
}

std::vector<double> Finite(const std::vector<double>& values) {
  std::vector<double> out;
  out.reserve(values.size());
  for (double v : values) {
    if (std::isfinite(v)) out.push_back(v);
  }
  return out;
}

std::vector<double> Clamped(const std::vector<double>& values) {
  std::vector<double> out = values;
  for (double& v : out) v = Clamp(v);
  return out;
}

// Σ(t³ − t) over the tie groups of the pooled sample.
double TieTerm(std::vector<double> pooled) {
  std::sort(pooled.begin(), pooled.end());
  double term = 0;
  for (size_t i = 0; i < pooled.size();) {
    size_t j = i;
    while (j < pooled.size() && pooled[j] == pooled[i]) ++j;
    const double t = static_cast<double>(j - i);
    term += t * t * t - t;
    i = j;
  }
  return term;
}

// Variance of U under the null with the tie correction.
double UVariance(int n, int m, double tie_term) {
  const double nn = n, mm = m, big_n = nn + mm;
  if (big_n < 2) return 0;
  return nn * mm / 12.0 * ((big_n + 1) - tie_term / (big_n * (big_n - 1)));
}

double TwoSided(double one_sided_p) {
  return std::min(1.0, 2 * one_sided_p);
}

}  // namespace

std::string_view ToString(Verdict verdict) {
  switch (verdict) {
    case Verdict::kNoChange:
      return "no-change";
    case Verdict::kImprovement:
      return "improvement";
    case Verdict::kRegression:
      return "regression";
    case Verdict::kCollapse:
      return "collapse";
    case Verdict::kInconclusive:
      break;
  }
  return "inconclusive";
}

double MedianOf(std::vector<double> values) {
  if (values.empty()) return 0;
  const size_t n = values.size();
  const size_t mid = n / 2;
  std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(mid), values.end());
  const double upper = values[mid];
  if (n % 2 == 1) return upper;
  const double lower =
      *std::max_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(mid));
  return (lower + upper) / 2;
}

MedianInterval MedianCi(std::vector<double> values, double confidence) {
  std::erase_if(values, [](double v) { return !std::isfinite(v); });
  std::sort(values.begin(), values.end());
  MedianInterval out;
  out.n = static_cast<int>(values.size());
  out.median = values.empty() ? std::nan("") : MedianOf(values);
  out.low = out.high = std::nan("");
  // P(B < k) for B ~ Binomial(n, ½), accumulated in k; the largest k with P ≤ tail.
  const double tail = (1 - confidence) / 2;
  const int n = out.n;
  double below = 0;                // P(B ≤ k − 1)
  double term = std::pow(0.5, n);  // P(B = 0)
  int k = 0;
  for (int j = 0; j < n; ++j) {
    below += term;  // now P(B ≤ j) = P(B < j + 1)
    if (below > tail) break;
    k = j + 1;
    term = term * (n - j) / (j + 1);
  }
  if (k >= 1 && 2 * k <= n) {
    out.low = values[static_cast<size_t>(k - 1)];
    out.high = values[static_cast<size_t>(n - k)];
  }
  return out;
}

double NormalCdf(double x) {
  return 0.5 * std::erfc(-x / std::sqrt(2.0));
}

double NormalQuantile(double p) {
  if (!(p > 0)) return -kInf;
  if (!(p < 1)) return kInf;
  // Bisection on Φ: slow but exact to double precision, and called a handful of times.
  double lo = -40, hi = 40;
  for (int i = 0; i < 200 && hi - lo > 1e-15; ++i) {
    const double mid = (lo + hi) / 2;
    (NormalCdf(mid) < p ? lo : hi) = mid;
  }
  return (lo + hi) / 2;
}

std::vector<double> MannWhitneyCounts(int n, int m) {
  n = std::max(n, 0);
  m = std::max(m, 0);
  // counts[j] for the current i: distribution of U for i A's and j B's (length i·j + 1).
  std::vector<std::vector<double>> counts(static_cast<size_t>(m) + 1, std::vector<double>{1.0});
  for (int i = 1; i <= n; ++i) {
    std::vector<std::vector<double>> next(static_cast<size_t>(m) + 1);
    next[0] = {1.0};
    for (int j = 1; j <= m; ++j) {
      std::vector<double> c(static_cast<size_t>(i) * j + 1, 0.0);
      const std::vector<double>& a_last = counts[j];    // (i − 1, j): the largest is an A
      const std::vector<double>& b_last = next[j - 1];  // (i, j − 1): the largest is a B, +i
      for (size_t u = 0; u < a_last.size(); ++u) c[u] += a_last[u];
      for (size_t u = 0; u < b_last.size(); ++u) c[u + static_cast<size_t>(i)] += b_last[u];
      next[j] = std::move(c);
    }
    counts = std::move(next);
  }
  return counts[static_cast<size_t>(m)];
}

double MannWhitneyU(const std::vector<double>& a, const std::vector<double>& b) {
  double u = 0;
  for (double x : a) {
    for (double y : b) {
      if (y > x) {
        u += 1;
      } else if (y == x) {
        u += 0.5;
      }
    }
  }
  return u;
}

OneSidedP ExactPValues(const std::vector<double>& a, const std::vector<double>& b) {
  const int n = static_cast<int>(a.size()), m = static_cast<int>(b.size());
  if (n == 0 || m == 0) return {};
  // Pool, sort, give each value its doubled mid-rank (an integer: first + last position).
  std::vector<std::pair<double, bool>> pooled;  // (value, is_b)
  for (double x : a) pooled.emplace_back(x, false);
  for (double y : b) pooled.emplace_back(y, true);
  std::sort(pooled.begin(), pooled.end());
  const int big_n = n + m;
  std::vector<int> rank2(static_cast<size_t>(big_n));
  long observed = 0;  // doubled rank sum of B
  for (int i = 0; i < big_n;) {
    int j = i;
    while (j < big_n && pooled[j].first == pooled[i].first) ++j;
    for (int k = i; k < j; ++k) rank2[k] = (i + 1) + j;  // (first + last) 1-based positions
    i = j;
  }
  for (int i = 0; i < big_n; ++i) {
    if (pooled[i].second) observed += rank2[i];
  }
  // dp[k][s]: number of k-subsets of the items seen so far with doubled rank sum s.
  const int max_sum = big_n * (big_n + 1);
  std::vector<std::vector<double>> dp(static_cast<size_t>(m) + 1,
                                      std::vector<double>(max_sum + 1, 0.0));
  dp[0][0] = 1;
  int reach = 0;
  for (int i = 0; i < big_n; ++i) {
    reach += rank2[i];
    for (int k = std::min(i + 1, m); k >= 1; --k) {
      std::vector<double>& to = dp[k];
      const std::vector<double>& from = dp[k - 1];
      for (int s = reach; s >= rank2[i]; --s) to[s] += from[s - rank2[i]];
    }
  }
  const std::vector<double>& dist = dp[m];
  double total = 0, at_least = 0, at_most = 0;
  for (int s = 0; s <= max_sum; ++s) {
    total += dist[s];
    if (s >= observed) at_least += dist[s];
    if (s <= observed) at_most += dist[s];
  }
  return {std::min(1.0, at_least / total), std::min(1.0, at_most / total)};
}

OneSidedP NormalPValues(const std::vector<double>& a, const std::vector<double>& b) {
  const int n = static_cast<int>(a.size()), m = static_cast<int>(b.size());
  if (n == 0 || m == 0) return {};
  std::vector<double> pooled = a;
  pooled.insert(pooled.end(), b.begin(), b.end());
  const double sd = std::sqrt(UVariance(n, m, TieTerm(std::move(pooled))));
  if (!(sd > 0)) return {};  // everything tied: no evidence either way
  const double centred = MannWhitneyU(a, b) - static_cast<double>(n) * m / 2;
  return {std::min(1.0, NormalCdf(-(centred - 0.5) / sd)),
          std::min(1.0, NormalCdf((centred + 0.5) / sd))};
}

namespace {

// The number of statistic values in the lower tail of a null distribution (counts per
// value) with at most (1 − confidence)/2 of the mass: the CI's order-statistic rank k.
int LowerTailCount(const std::vector<double>& counts, double confidence) {
  const double total = std::accumulate(counts.begin(), counts.end(), 0.0);
  const double tail = (1 - confidence) / 2 * total * (1 + 1e-12);  // counts are integers
  double cumulative = 0;
  int k = 0;
  for (double c : counts) {
    cumulative += c;
    if (cumulative > tail) break;
    ++k;
  }
  return k;
}

// p_value: the one-sided p in the estimate's direction; q_value that of a one-cell study.
void ChooseDirection(CellComparison* out) {
  if (out->ratio > 1) {
    out->p_value = out->p_improvement;
  } else if (out->ratio < 1) {
    out->p_value = out->p_regression;
  } else {
    out->p_value = std::min(out->p_improvement, out->p_regression);
  }
  out->q_value = TwoSided(out->p_value);
}

// The CI from the k-th smallest and k-th largest of sorted log values (unbounded if k < 1).
void SetCi(CellComparison* out, const std::vector<double>& sorted_logs, int k) {
  // A bound beyond ~31,600x (half of ln kMinThroughput) only arises from a run that made no
  // progress (clamped to kMinThroughput): it is not a measurement, so the CI is unbounded
  // on that side.
  const double kUnboundedLog = -std::log(kMinThroughput) / 2;
  if (k >= 1) {
    const double low = sorted_logs[static_cast<size_t>(k) - 1];
    const double high = sorted_logs[sorted_logs.size() - static_cast<size_t>(k)];
    out->ci_low = low < -kUnboundedLog ? 0 : std::exp(low);
    out->ci_high = high > kUnboundedLog ? kInf : std::exp(high);
  } else {
    out->ci_low = 0;
    out->ci_high = kInf;
  }
}

}  // namespace

int ExactCiRank(int n, int m, double confidence) {
  if (n <= 0 || m <= 0) return 0;
  return std::min(LowerTailCount(MannWhitneyCounts(n, m), confidence), (n * m + 1) / 2);
}

int NormalCiRank(int n, int m, double confidence, double tie_term) {
  if (n <= 0 || m <= 0) return 0;
  const double sd = std::sqrt(UVariance(n, m, tie_term));
  const double z = NormalQuantile(1 - (1 - confidence) / 2);
  const double k = std::floor(static_cast<double>(n) * m / 2 + 0.5 - z * sd);
  if (!(k >= 1)) return 0;
  return static_cast<int>(std::min(k, static_cast<double>((n * m + 1) / 2)));
}

std::vector<double> PairwiseLogDifferences(const std::vector<double>& a,
                                           const std::vector<double>& b) {
  std::vector<double> diffs;
  diffs.reserve(a.size() * b.size());
  for (double x : a) {
    const double lx = std::log(Clamp(x));
    for (double y : b) diffs.push_back(std::log(Clamp(y)) - lx);
  }
  std::sort(diffs.begin(), diffs.end());
  return diffs;
}

std::vector<double> BenjaminiHochberg(const std::vector<double>& p_values) {
  const size_t count = p_values.size();
  std::vector<size_t> order(count);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t x, size_t y) { return p_values[x] < p_values[y]; });
  std::vector<double> q(count, 1.0);
  double running = 1.0;
  for (size_t r = count; r-- > 0;) {  // from the largest p down: q_(r) = min_{j≥r} p_(j)·M/j
    const size_t i = order[r];
    running =
        std::min(running, p_values[i] * static_cast<double>(count) / static_cast<double>(r + 1));
    q[i] = std::min(1.0, running);
  }
  return q;
}

Verdict DecideVerdict(const CellComparison& cell, const CompareOptions& options) {
  if (cell.n_a < 2 || cell.n_b < 2 || std::isnan(cell.ratio)) return Verdict::kInconclusive;
  if (cell.max_b_below_min_a && cell.ratio < 0.5) return Verdict::kCollapse;
  if (cell.q_value <= options.alpha) {
    if (cell.ratio >= 1 + options.min_effect) return Verdict::kImprovement;
    if (cell.ratio <= 1 - options.min_effect) return Verdict::kRegression;
  }
  if (cell.ci_low >= 1 - options.min_effect && cell.ci_high <= 1 + options.min_effect)
    return Verdict::kNoChange;
  return Verdict::kInconclusive;
}

CellComparison Compare(const std::vector<double>& a_in, const std::vector<double>& b_in,
                       const CompareOptions& options) {
  const std::vector<double> a_raw = Finite(a_in), b_raw = Finite(b_in);
  CellComparison out;
  out.n_a = static_cast<int>(a_raw.size());
  out.n_b = static_cast<int>(b_raw.size());
  out.median_a = MedianOf(a_raw);
  out.median_b = MedianOf(b_raw);
  if (out.n_a < 2 || out.n_b < 2) {
    out.ratio = out.ci_low = out.ci_high = kNaN;
    out.verdict = Verdict::kInconclusive;
    return out;
  }
  const std::vector<double> a = Clamped(a_raw), b = Clamped(b_raw);
  out.max_b_below_min_a =
      *std::max_element(b.begin(), b.end()) < *std::min_element(a.begin(), a.end());

  const std::vector<double> diffs = PairwiseLogDifferences(a, b);
  out.ratio = std::exp(MedianOf(diffs));

  out.exact = out.n_a <= kExactLimitPerSide && out.n_b <= kExactLimitPerSide;
  const OneSidedP p = out.exact ? ExactPValues(a, b) : NormalPValues(a, b);
  out.p_improvement = p.improvement;
  out.p_regression = p.regression;
  ChooseDirection(&out);

  // The CI's k uses the tie-free distribution in the exact case: ties in measured
  // throughputs are rounding, and the shift model is a continuous one.
  std::vector<double> pooled = a;
  pooled.insert(pooled.end(), b.begin(), b.end());
  const int k =
      out.exact ? ExactCiRank(out.n_a, out.n_b, options.confidence)
                : NormalCiRank(out.n_a, out.n_b, options.confidence, TieTerm(std::move(pooled)));
  SetCi(&out, diffs, k);
  out.verdict = DecideVerdict(out, options);
  return out;
}

namespace {

// Number of sign assignments giving each value of Σ (doubled) ranks of the positive
// differences: counts[s] for s = 0..Σ ranks2.
std::vector<double> SignedRankCounts(const std::vector<int>& ranks2) {
  int total = 0;
  for (int r : ranks2) total += r;
  std::vector<double> counts(static_cast<size_t>(total) + 1, 0.0);
  counts[0] = 1;
  int reach = 0;
  for (int r : ranks2) {
    for (int s = reach; s >= 0; --s) {
      if (counts[static_cast<size_t>(s)] != 0)
        counts[static_cast<size_t>(s) + static_cast<size_t>(r)] += counts[static_cast<size_t>(s)];
    }
    reach += r;
  }
  return counts;
}

}  // namespace

CellComparison ComparePaired(const std::vector<double>& a_in, const std::vector<double>& b_in,
                             const CompareOptions& options) {
  std::vector<double> a_raw, b_raw;
  for (size_t i = 0; i < std::min(a_in.size(), b_in.size()); ++i) {
    if (std::isfinite(a_in[i]) && std::isfinite(b_in[i])) {
      a_raw.push_back(a_in[i]);
      b_raw.push_back(b_in[i]);
    }
  }
  CellComparison out;
  out.paired = true;
  const int n = static_cast<int>(a_raw.size());
  out.n_a = out.n_b = n;
  out.median_a = MedianOf(a_raw);
  out.median_b = MedianOf(b_raw);
  if (n < 2) {
    out.ratio = out.ci_low = out.ci_high = kNaN;
    out.verdict = Verdict::kInconclusive;
    return out;
  }
  const std::vector<double> a = Clamped(a_raw), b = Clamped(b_raw);
  out.max_b_below_min_a =
      *std::max_element(b.begin(), b.end()) < *std::min_element(a.begin(), a.end());
  std::vector<double> d(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i)
    d[static_cast<size_t>(i)] =
        std::log(b[static_cast<size_t>(i)]) - std::log(a[static_cast<size_t>(i)]);

  std::vector<double> walsh;
  walsh.reserve(static_cast<size_t>(n) * (n + 1) / 2);
  for (int i = 0; i < n; ++i) {
    for (int j = i; j < n; ++j)
      walsh.push_back((d[static_cast<size_t>(i)] + d[static_cast<size_t>(j)]) / 2);
  }
  std::sort(walsh.begin(), walsh.end());
  out.ratio = std::exp(MedianOf(walsh));

  // p: signed ranks of the non-zero differences, mid-ranks for tied |d|, doubled to integers.
  std::vector<double> nonzero;
  for (double x : d) {
    if (x != 0) nonzero.push_back(x);
  }
  const int m = static_cast<int>(nonzero.size());
  std::vector<size_t> order(static_cast<size_t>(m));
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(),
            [&](size_t x, size_t y) { return std::fabs(nonzero[x]) < std::fabs(nonzero[y]); });
  std::vector<int> ranks2(static_cast<size_t>(m));
  double tie_term = 0;
  for (size_t i = 0; i < order.size();) {
    size_t j = i;
    while (j + 1 < order.size() && std::fabs(nonzero[order[j + 1]]) == std::fabs(nonzero[order[i]]))
      ++j;
    const int doubled =
        static_cast<int>(i + 1 + j + 1);  // 2 × mid-rank of positions i..j (1-based)
    for (size_t k = i; k <= j; ++k) ranks2[order[k]] = doubled;
    const double t = static_cast<double>(j - i + 1);
    tie_term += t * t * t - t;
    i = j + 1;
  }
  int w2 = 0;  // doubled W+
  for (int i = 0; i < m; ++i) {
    if (nonzero[static_cast<size_t>(i)] > 0) w2 += ranks2[static_cast<size_t>(i)];
  }
  out.exact = n <= kExactPairedLimit;
  if (m == 0) {
    out.p_improvement = out.p_regression = 1;
  } else if (out.exact) {
    const std::vector<double> counts = SignedRankCounts(ranks2);
    const double total = std::accumulate(counts.begin(), counts.end(), 0.0);
    double at_least = 0, at_most = 0;
    for (size_t s = 0; s < counts.size(); ++s) {
      if (static_cast<int>(s) >= w2) at_least += counts[s];
      if (static_cast<int>(s) <= w2) at_most += counts[s];
    }
    out.p_improvement = std::min(1.0, at_least / total);
    out.p_regression = std::min(1.0, at_most / total);
  } else {
    const double mean = static_cast<double>(m) * (m + 1) / 4;
    const double var = static_cast<double>(m) * (m + 1) * (2 * m + 1) / 24 - tie_term / 48;
    const double sd = std::sqrt(std::max(var, 0.0));
    const double w = w2 / 2.0;
    if (sd > 0) {
      out.p_improvement = std::min(1.0, NormalCdf(-(w - mean - 0.5) / sd));
      out.p_regression = std::min(1.0, NormalCdf((w - mean + 0.5) / sd));
    }
  }
  ChooseDirection(&out);

  // CI: tie-free W+ distribution over ranks 1..n (doubled: 2..2n), k-th Walsh average.
  const int big_m = static_cast<int>(walsh.size());
  int k = 0;
  if (out.exact) {
    std::vector<int> plain(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) plain[static_cast<size_t>(i)] = i + 1;
    k = LowerTailCount(SignedRankCounts(plain), options.confidence);
  } else {
    const double z = NormalQuantile(1 - (1 - options.confidence) / 2);
    const double kk = std::floor(
        big_m / 2.0 + 0.5 - z * std::sqrt(static_cast<double>(n) * (n + 1) * (2 * n + 1) / 24));
    k = kk >= 1 ? static_cast<int>(kk) : 0;
  }
  SetCi(&out, walsh, std::min(k, (big_m + 1) / 2));
  out.verdict = DecideVerdict(out, options);
  return out;
}

void ApplyStudyVerdicts(std::vector<CellComparison>* cells, const CompareOptions& options) {
  std::vector<size_t> family;
  std::vector<double> p;
  for (size_t i = 0; i < cells->size(); ++i) {
    const CellComparison& c = (*cells)[i];
    if (c.n_a >= 2 && c.n_b >= 2) {
      family.push_back(i);
      p.push_back(TwoSided(c.p_value));
    }
  }
  const std::vector<double> q = BenjaminiHochberg(p);
  for (size_t f = 0; f < family.size(); ++f) (*cells)[family[f]].q_value = q[f];
  for (CellComparison& c : *cells) c.verdict = DecideVerdict(c, options);
}

bool NeedsMorePairs(const CellComparison& cell, double target_half_width, int max_pairs) {
  if (std::min(cell.n_a, cell.n_b) >= max_pairs) return false;
  if (cell.verdict == Verdict::kCollapse) return false;
  if (cell.n_a < 2 || cell.n_b < 2) return true;
  const double half_width = (cell.ci_high - cell.ci_low) / 2;
  return !(half_width <= target_half_width);
}

DifferenceComparison CompareDifference(const std::vector<double>& a, const std::vector<double>& b,
                                       bool paired, const CompareOptions& options) {
  // The ratio machinery on e^(v/s): ln(e^(b/s) / e^(a/s)) = (b − a)/s, so its Hodges–Lehmann
  // estimate and order-statistic CI are those of b − a over s, and its rank tests read the
  // order of the values (unpaired) or of |b_i − a_i| (paired), which the map keeps. s keeps
  // every value's exponent within ±4, so a difference's within ±8: inside the ratio CI's
  // "no progress" cut (a log-ratio bound beyond ±10.4 reads as unbounded, SetCi), which at
  // ±30 turned the CI of 0 against 0.01-0.04 — a frame seen on one kernel only — into
  // "unbounded" for the very frames that matter.
  double largest = 0;
  for (const auto* side : {&a, &b}) {
    for (double v : *side) {
      if (std::isfinite(v)) largest = std::max(largest, std::fabs(v));
    }
  }
  const double s = largest > 0 ? largest / 4 : 1;
  auto mapped = [s](const std::vector<double>& values) {
    std::vector<double> out;
    out.reserve(values.size());
    for (double v : values) out.push_back(std::isfinite(v) ? std::exp(v / s) : v);
    return out;
  };
  const CellComparison c = paired ? ComparePaired(mapped(a), mapped(b), options)
                                  : Compare(mapped(a), mapped(b), options);
  DifferenceComparison out;
  out.paired = c.paired;
  auto back = [s](double ratio) {
    if (std::isnan(ratio)) return kNaN;
    if (!(ratio > 0)) return -std::numeric_limits<double>::infinity();
    return s * std::log(ratio);
  };
  out.shift = back(c.ratio);
  out.ci_low = back(c.ci_low);
  out.ci_high = back(c.ci_high);
  out.p_value = std::isnan(c.ratio) ? 1 : std::min(1.0, 2 * c.p_value);
  return out;
}

}  // namespace faultline::stats

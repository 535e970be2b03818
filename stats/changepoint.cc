#include "stats/changepoint.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

namespace faultline::stats {
namespace {

double Mean(const double* v, size_t n) {
  double sum = 0;
  for (size_t i = 0; i < n; ++i) sum += v[i];
  return sum / static_cast<double>(n);
}

double SampleVariance(const double* v, size_t n, double mean) {
  double ss = 0;
  for (size_t i = 0; i < n; ++i) ss += (v[i] - mean) * (v[i] - mean);
  return ss / static_cast<double>(n - 1);
}

// Tests the change at `index` between [begin, index) and [index, end). A side shorter than
// min_segment counts as p = 1 (the outlier rule, see the header).
ChangePoint TestSplit(const std::vector<double>& series, size_t begin, size_t index, size_t end,
                      size_t min_segment) {
  ChangePoint cp;
  cp.index = index;
  const size_t n_a = index - begin, n_b = end - index;
  cp.mean_before = n_a > 0 ? Mean(series.data() + begin, n_a) : 0;
  cp.mean_after = n_b > 0 ? Mean(series.data() + index, n_b) : 0;
  cp.relative_change = cp.mean_before != 0 ? cp.mean_after / cp.mean_before - 1 : 0;
  cp.p_value = 1;
  if (n_a >= min_segment && n_b >= min_segment) {
    const double* a = series.data() + begin;
    const double* b = series.data() + index;
    cp.p_value = std::max(WelchTTest(a, n_a, b, n_b).p, StudentTTest(a, n_a, b, n_b).p);
  }
  return cp;
}

// Continued fraction of the incomplete beta function (modified Lentz).
double BetaContinuedFraction(double a, double b, double x) {
  constexpr double kTiny = 1e-300;
  constexpr double kEps = 1e-15;
  const double qab = a + b, qap = a + 1, qam = a - 1;
  double c = 1, d = 1 - qab * x / qap;
  if (std::fabs(d) < kTiny) d = kTiny;
  d = 1 / d;
  double h = d;
  for (int m = 1; m <= 10000; ++m) {
    const double m2 = 2.0 * m;
    double aa = m * (b - m) * x / ((qam + m2) * (a + m2));
    d = 1 + aa * d;
    if (std::fabs(d) < kTiny) d = kTiny;
    c = 1 + aa / c;
    if (std::fabs(c) < kTiny) c = kTiny;
    d = 1 / d;
    h *= d * c;
    aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2));
    d = 1 + aa * d;
    if (std::fabs(d) < kTiny) d = kTiny;
    c = 1 + aa / c;
    if (std::fabs(c) < kTiny) c = kTiny;
    d = 1 / d;
    const double del = d * c;
    h *= del;
    if (std::fabs(del - 1) < kEps) break;
  }
  return h;
}

// The split step in one window [begin, end): E-divisive with the first-pass threshold.
std::vector<size_t> SplitWindow(const std::vector<double>& series, size_t begin, size_t end,
                                size_t min_segment, double first_pass_p) {
  std::vector<size_t> found;  // sorted
  while (true) {
    // Segments of the window between the change points found so far.
    size_t best_tau = 0, best_begin = 0, best_end = 0;
    double best_q = -std::numeric_limits<double>::infinity();
    bool any = false;
    size_t seg_begin = begin;
    for (size_t k = 0; k <= found.size(); ++k) {
      const size_t seg_end = k < found.size() ? found[k] : end;
      size_t tau = 0;
      double q = 0;
      if (EDivisiveCandidate(series, seg_begin, seg_end, min_segment, &tau, &q) &&
          (!any || q > best_q)) {
        any = true;
        best_q = q;
        best_tau = tau;
        best_begin = seg_begin;
        best_end = seg_end;
      }
      seg_begin = seg_end;
    }
    if (!any) break;
    const ChangePoint cp = TestSplit(series, best_begin, best_tau, best_end, min_segment);
    if (!(cp.p_value <= first_pass_p)) break;
    found.insert(std::upper_bound(found.begin(), found.end(), best_tau), best_tau);
  }
  return found;
}

}  // namespace

double RegularizedIncompleteBeta(double a, double b, double x) {
  if (x <= 0) return 0;
  if (x >= 1) return 1;
  const double log_front =
      std::lgamma(a + b) - std::lgamma(a) - std::lgamma(b) + a * std::log(x) + b * std::log1p(-x);
  const double front = std::exp(log_front);
  if (x < (a + 1) / (a + b + 2)) return front * BetaContinuedFraction(a, b, x) / a;
  return 1 - front * BetaContinuedFraction(b, a, 1 - x) / b;
}

double StudentTwoSidedP(double t, double df) {
  if (std::isnan(t) || !(df > 0)) return 1;
  if (std::isinf(t)) return 0;
  const double p = RegularizedIncompleteBeta(df / 2, 0.5, df / (df + t * t));
  return std::clamp(p, 0.0, 1.0);
}

TTestResult WelchTTest(const double* a, size_t n_a, const double* b, size_t n_b) {
  TTestResult result;
  if (n_a < 2 || n_b < 2) return result;
  const double mean_a = Mean(a, n_a), mean_b = Mean(b, n_b);
  const double va = SampleVariance(a, n_a, mean_a) / static_cast<double>(n_a);
  const double vb = SampleVariance(b, n_b, mean_b) / static_cast<double>(n_b);
  const double se2 = va + vb;
  if (!(se2 > 0)) {
    // Both sides constant: a clean step is certain, equal constants are no change.
    result.t = mean_a == mean_b
                   ? 0
                   : std::copysign(std::numeric_limits<double>::infinity(), mean_b - mean_a);
    result.df = static_cast<double>(n_a + n_b - 2);
    result.p = mean_a == mean_b ? 1 : 0;
    return result;
  }
  result.t = (mean_b - mean_a) / std::sqrt(se2);
  result.df =
      se2 * se2 / (va * va / static_cast<double>(n_a - 1) + vb * vb / static_cast<double>(n_b - 1));
  result.p = StudentTwoSidedP(result.t, result.df);
  return result;
}

TTestResult StudentTTest(const double* a, size_t n_a, const double* b, size_t n_b) {
  TTestResult result;
  if (n_a < 1 || n_b < 1 || n_a + n_b < 3) return result;
  const double mean_a = Mean(a, n_a), mean_b = Mean(b, n_b);
  double ss = 0;
  for (size_t i = 0; i < n_a; ++i) ss += (a[i] - mean_a) * (a[i] - mean_a);
  for (size_t i = 0; i < n_b; ++i) ss += (b[i] - mean_b) * (b[i] - mean_b);
  result.df = static_cast<double>(n_a + n_b - 2);
  const double se2 = ss / result.df * (1 / static_cast<double>(n_a) + 1 / static_cast<double>(n_b));
  if (!(se2 > 0)) {
    result.t = mean_a == mean_b
                   ? 0
                   : std::copysign(std::numeric_limits<double>::infinity(), mean_b - mean_a);
    result.p = mean_a == mean_b ? 1 : 0;
    return result;
  }
  result.t = (mean_b - mean_a) / std::sqrt(se2);
  result.p = StudentTwoSidedP(result.t, result.df);
  return result;
}

bool EDivisiveCandidate(const std::vector<double>& series, size_t begin, size_t end,
                        size_t min_segment, size_t* tau_out, double* q_out) {
  if (min_segment < 1) min_segment = 1;
  if (end > series.size() || end < begin || end - begin < 2 * min_segment) return false;
  const size_t len = end - begin;
  const double* x = series.data() + begin;
  // prefix[j * (len + 1) + i] = Σ_{r < i} |x_r − x_j|: partial column sums of the distances.
  std::vector<double> prefix(len * (len + 1), 0.0);
  for (size_t j = 0; j < len; ++j) {
    double* col = &prefix[j * (len + 1)];
    for (size_t i = 0; i < len; ++i) col[i + 1] = col[i] + std::fabs(x[i] - x[j]);
  }
  auto col_sum = [&](size_t j, size_t from, size_t to) {  // Σ_{from ≤ r < to} |x_r − x_j|
    return prefix[j * (len + 1) + to] - prefix[j * (len + 1) + from];
  };

  bool any = false;
  double best_q = 0;
  size_t best_tau = 0;
  double within_x = 0;  // Σ over pairs inside [0, tau)
  for (size_t tau = 1; tau + min_segment <= len; ++tau) {
    within_x += col_sum(tau - 1, 0, tau - 1);
    if (tau < min_segment) continue;
    const double n = static_cast<double>(tau);
    double between = 0, within_y = 0;
    for (size_t kappa = tau + 1; kappa <= len; ++kappa) {
      // Adds point kappa − 1 to Y = [tau, kappa).
      between += col_sum(kappa - 1, 0, tau);
      within_y += col_sum(kappa - 1, tau, kappa - 1);
      const double m = static_cast<double>(kappa - tau);
      double q = 2 / (n + m) * between;
      if (tau > 1) q -= 2 * m / ((n + m) * (n - 1)) * within_x;
      if (kappa - tau > 1) q -= 2 * n / ((n + m) * (m - 1)) * within_y;
      if (!any || q > best_q) {
        any = true;
        best_q = q;
        best_tau = tau;
      }
    }
  }
  if (!any) return false;
  *tau_out = begin + best_tau;
  *q_out = best_q;
  return true;
}

std::vector<ChangePoint> DetectChangePoints(const std::vector<double>& series,
                                            const ChangePointOptions& options) {
  const size_t min_segment = static_cast<size_t>(std::max(2, options.min_segment));
  const size_t window = std::max(static_cast<size_t>(std::max(0, options.window)), 2 * min_segment);
  const size_t n = series.size();
  if (n < 2 * min_segment) return {};
  for (double v : series) {
    if (!std::isfinite(v)) return {};
  }
  const double max_p = options.max_p_value;
  // Otava's relaxed first pass: the split finds weak change points, the merge keeps the strong.
  const double first_pass_p = max_p < 0.05 ? max_p * 10 : (max_p < 0.5 ? max_p * 2 : max_p);

  // Split.
  std::set<size_t> weak;
  const size_t step = std::max<size_t>(1, window / 2);
  for (size_t start = 0; start < n;) {
    const size_t end = std::min(start + window, n);
    const std::vector<size_t> found = SplitWindow(series, start, end, min_segment, first_pass_p);
    weak.insert(found.begin(), found.end());
    start = std::max(found.empty() ? 0 : found.back(), start + step);
  }

  // Merge.
  std::vector<ChangePoint> cps;
  std::vector<size_t> indexes(weak.begin(), weak.end());
  auto retest = [&](size_t k) {
    const size_t begin = k == 0 ? 0 : cps[k - 1].index;
    const size_t end = k + 1 < cps.size() ? cps[k + 1].index : n;
    cps[k] = TestSplit(series, begin, cps[k].index, end, min_segment);
  };
  for (size_t index : indexes) cps.push_back(ChangePoint{index});
  for (size_t k = 0; k < cps.size(); ++k) retest(k);

  // The p its neighbours would have after removing cps[k] (the best of the two, 1 if none):
  // when several change points are weak, removing the one whose removal leaves the strongest
  // neighbour keeps a big step that a smaller step beside it made look weak (seen: a -55%
  // step followed two nights later by a -35% one; removing by largest p alone lost both).
  auto neighbour_p_after_removal = [&](size_t k) {
    std::vector<ChangePoint> saved = cps;
    cps.erase(cps.begin() + static_cast<std::ptrdiff_t>(k));
    double best = 1;
    if (k > 0) {
      retest(k - 1);
      best = std::min(best, cps[k - 1].p_value);
    }
    if (k < cps.size()) {
      retest(k);
      best = std::min(best, cps[k].p_value);
    }
    cps = std::move(saved);
    return best;
  };

  while (!cps.empty()) {
    size_t weakest = 0;
    for (size_t k = 1; k < cps.size(); ++k) {
      const ChangePoint& a = cps[k];
      const ChangePoint& b = cps[weakest];
      if (a.p_value > b.p_value ||
          (a.p_value == b.p_value && std::fabs(a.relative_change) < std::fabs(b.relative_change))) {
        weakest = k;
      }
    }
    if (cps[weakest].p_value > max_p && cps.size() > 1) {
      double best_after = neighbour_p_after_removal(weakest);
      for (size_t k = 0; k < cps.size(); ++k) {
        if (k == weakest || !(cps[k].p_value > max_p)) continue;
        const double after = neighbour_p_after_removal(k);
        if (after < best_after) {
          best_after = after;
          weakest = k;
        }
      }
    }
    if (!(cps[weakest].p_value > max_p)) {
      weakest = 0;
      for (size_t k = 1; k < cps.size(); ++k) {
        if (std::fabs(cps[k].relative_change) < std::fabs(cps[weakest].relative_change)) {
          weakest = k;
        }
      }
      if (std::fabs(cps[weakest].relative_change) >= options.min_magnitude) break;
    }
    cps.erase(cps.begin() + static_cast<std::ptrdiff_t>(weakest));
    // The neighbours' segments grew: the left one's right side, the right one's left side.
    if (weakest > 0) retest(weakest - 1);
    if (weakest < cps.size()) retest(weakest);
  }
  return cps;
}

}  // namespace faultline::stats

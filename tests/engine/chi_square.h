// Two-sample chi-square test for the statistical tests of speculative sampling: are two token
// histograms draws from one distribution? Categories with fewer than 10 expected counts in
// either sample are pooled into one, so the chi-square approximation holds.
#pragma once

#include <cmath>
#include <cstdint>
#include <map>

namespace cadenza::test_util {

struct ChiSquare {
  double statistic = 0;
  int df = 0;
  double critical = 0;  // at significance 1e-4 (Wilson-Hilferty approximation)
  bool same() const { return df == 0 || statistic <= critical; }
};

// Histograms map a category (a token id) to its count.
inline ChiSquare chi_square_two_sample(const std::map<int32_t, int64_t>& a,
                                       const std::map<int32_t, int64_t>& b) {
  double na = 0, nb = 0;
  for (const auto& [k, v] : a) na += static_cast<double>(v);
  for (const auto& [k, v] : b) nb += static_cast<double>(v);
  std::map<int32_t, std::pair<double, double>> both;
  for (const auto& [k, v] : a) both[k].first += static_cast<double>(v);
  for (const auto& [k, v] : b) both[k].second += static_cast<double>(v);
  // Pool the rare categories.
  std::map<int32_t, std::pair<double, double>> cells;
  std::pair<double, double> pooled{0, 0};
  for (const auto& [k, c] : both) {
    const double total = c.first + c.second;
    const double ea = total * na / (na + nb), eb = total * nb / (na + nb);
    if (ea < 10 || eb < 10) {
      pooled.first += c.first;
      pooled.second += c.second;
    } else {
      cells[k] = c;
    }
  }
  if (pooled.first + pooled.second > 0) cells[-1] = pooled;
  ChiSquare r;
  // Scaled two-sample statistic: sum over cells of (sqrt(nb/na) a - sqrt(na/nb) b)^2 / (a + b).
  const double ka = std::sqrt(nb / na), kb = std::sqrt(na / nb);
  for (const auto& [k, c] : cells) {
    if (c.first + c.second == 0) continue;
    const double d = ka * c.first - kb * c.second;
    r.statistic += d * d / (c.first + c.second);
  }
  r.df = static_cast<int>(cells.size()) - 1;
  if (r.df > 0) {
    const double z = 3.719;  // the standard normal's 1 - 1e-4 quantile
    const double df = r.df;
    const double t = 1.0 - 2.0 / (9.0 * df) + z * std::sqrt(2.0 / (9.0 * df));
    r.critical = df * t * t * t;
  }
  return r;
}

}  // namespace cadenza::test_util

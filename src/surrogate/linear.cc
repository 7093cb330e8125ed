// Ridge regression: Cholesky on the normal equations, with sign constraints by elimination.
#include "corun/surrogate/regressor.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "corun/core/check.h"

namespace corun::surrogate {

namespace {

// Solves A_FF w_F = b_F (A symmetric positive definite, d x d) for the inputs in `free`;
// the other entries of `w` are 0.
std::vector<double> solve_on(const std::vector<double>& a, const std::vector<double>& b,
                             std::size_t d, const std::vector<std::size_t>& free) {
  const std::size_t f = free.size();
  std::vector<double> l(f * f, 0.0), z(f, 0.0), wf(f, 0.0), w(d, 0.0);
  // Cholesky A_FF = L L'.
  for (std::size_t j = 0; j < f; ++j) {
    double s = a[free[j] * d + free[j]];
    for (std::size_t p = 0; p < j; ++p) s -= l[j * f + p] * l[j * f + p];
    l[j * f + j] = std::sqrt(std::max(s, 1e-300));
    for (std::size_t i = j + 1; i < f; ++i) {
      double t = a[free[i] * d + free[j]];
      for (std::size_t p = 0; p < j; ++p) t -= l[i * f + p] * l[j * f + p];
      l[i * f + j] = t / l[j * f + j];
    }
  }
  for (std::size_t i = 0; i < f; ++i) {  // L z = b
    double t = b[free[i]];
    for (std::size_t p = 0; p < i; ++p) t -= l[i * f + p] * z[p];
    z[i] = t / l[i * f + i];
  }
  for (std::size_t i = f; i-- > 0;) {  // L' w = z
    double t = z[i];
    for (std::size_t p = i + 1; p < f; ++p) t -= l[p * f + i] * wf[p];
    wf[i] = t / l[i * f + i];
  }
  for (std::size_t i = 0; i < f; ++i) w[free[i]] = wf[i];
  return w;
}

}  // namespace

LinearModel fit_linear(const Matrix& x, const Matrix& y, double lambda,
                       const std::vector<std::vector<int>>& signs) {
  CORUN_CHECK(x.rows == y.rows && x.rows > 0);
  const std::size_t n = x.rows, d = x.cols, k = y.cols;
  std::vector<double> xm(d, 0.0), ym(k, 0.0);
  for (std::size_t r = 0; r < n; ++r) {
    for (std::size_t i = 0; i < d; ++i) xm[i] += x.at(r, i);
    for (std::size_t o = 0; o < k; ++o) ym[o] += y.at(r, o);
  }
  for (auto& v : xm) v /= static_cast<double>(n);
  for (auto& v : ym) v /= static_cast<double>(n);
  // A = Xc'Xc + lambda n I (lambda relative to the data size), B = Xc'Yc.
  std::vector<double> a(d * d, 0.0), b(d * k, 0.0);
  for (std::size_t r = 0; r < n; ++r) {
    for (std::size_t i = 0; i < d; ++i) {
      const double xi = x.at(r, i) - xm[i];
      for (std::size_t j = 0; j < d; ++j) a[i * d + j] += xi * (x.at(r, j) - xm[j]);
      for (std::size_t o = 0; o < k; ++o) b[i * k + o] += xi * (y.at(r, o) - ym[o]);
    }
  }
  for (std::size_t i = 0; i < d; ++i) a[i * d + i] += lambda * static_cast<double>(n) + 1e-12;
  LinearModel m;
  m.in = static_cast<int>(d);
  m.out = static_cast<int>(k);
  m.w.assign(d * k, 0.0);
  m.b.assign(k, 0.0);
  std::vector<double> bo(d);
  for (std::size_t o = 0; o < k; ++o) {
    for (std::size_t i = 0; i < d; ++i) bo[i] = b[i * k + o];
    const std::vector<int>* sign = o < signs.size() && !signs[o].empty() ? &signs[o] : nullptr;
    // Sign constraints by elimination: solve, drop every input whose weight has the wrong
    // sign (its weight becomes 0, which satisfies the constraint), solve again; at most d
    // rounds. The result is feasible, not necessarily the constrained least-squares optimum.
    std::vector<std::size_t> free(d);
    std::iota(free.begin(), free.end(), 0);
    std::vector<double> w;
    for (;;) {
      w = solve_on(a, bo, d, free);
      if (sign == nullptr) break;
      std::vector<std::size_t> kept;
      for (auto i : free) {
        if (i < sign->size() && (*sign)[i] != 0 && w[i] * (*sign)[i] < 0) continue;
        kept.push_back(i);
      }
      if (kept.size() == free.size()) break;
      free = std::move(kept);
    }
    double bias = ym[o];
    for (std::size_t i = 0; i < d; ++i) {
      m.w[i * k + o] = w[i];
      bias -= xm[i] * w[i];
    }
    m.b[o] = bias;
  }
  return m;
}

}  // namespace corun::surrogate

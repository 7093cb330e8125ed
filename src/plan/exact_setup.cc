// The exact solver's setup (exact_internal.h): each configuration's contribution and utility
// bound, the branching order, the load directions of the relaxations, and each configuration's
// extents and ceilings along them.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "exact_internal.h"

namespace corun::detail {

ExactSearch::ExactSearch(const PlanProblem& problem, const AggregatePredictor& a)
    : p(problem), agg(a), recall(a.monotone()), dims(a.aggregate_dims()) {
  const std::size_t n = p.models();
  c.resize(n);
  cmin.assign(n, std::vector<float>(dims, 0));
  cands.resize(n);
  ub.resize(n);
  for (auto m : p.active_models()) {
    const std::size_t count = p.local_count(m);
    c[m].assign(count, std::vector<float>(dims));
    for (std::size_t l = 0; l < count; ++l) {
      agg.contribution(m, static_cast<std::int32_t>(l), c[m][l]);
      for (std::size_t k = 0; k < dims; ++k) {
        cmin[m][k] = l == 0 ? c[m][l][k] : std::min(cmin[m][k], c[m][l][k]);
      }
    }
  }
  // Bounds per (m, l) against the least the other active models can add.
  ub = *detail::utility_bounds(p, &evaluated);
  for (auto m : p.active_models()) {
    for (std::size_t l = 0; l < p.local_count(m); ++l) {
      if (std::isfinite(ub[m][l])) cands[m].push_back(static_cast<std::int32_t>(l));
    }
    std::sort(cands[m].begin(), cands[m].end(), [&](auto x, auto y) {
      return ub[m][static_cast<std::size_t>(x)] > ub[m][static_cast<std::size_t>(y)];
    });
  }
  memo.resize(n);
  for (auto m : p.active_models()) memo[m].resize(p.local_count(m));
  directions();
  ceilings();
  // Branch on the heaviest models first (largest extent along the first load direction,
  // the diagonal): their choices constrain everyone else's most, so bounds tighten early.
  auto heaviest = [&](std::size_t m) {
    double e = 0;
    if (!dirs.empty()) {
      for (auto l : cands[m]) e = std::max(e, ext[m][static_cast<std::size_t>(l)][0]);
    }
    return e;
  };
  order = p.active_models();
  std::stable_sort(order.begin(), order.end(),
                   [&](auto x, auto y) { return heaviest(x) > heaviest(y); });
  const std::size_t depth = order.size();
  rest_min.assign(depth + 1, std::vector<float>(dims, 0));
  rest_vram.assign(depth + 1, 0);
  for (std::size_t d = depth; d-- > 0;) {
    const std::size_t m = order[d];
    for (std::size_t k = 0; k < dims; ++k) rest_min[d][k] = rest_min[d + 1][k] + cmin[m][k];
    double min_vram = std::numeric_limits<double>::infinity();
    for (std::size_t l = 0; l < p.local_count(m); ++l) {
      min_vram = std::min(min_vram, p.space().local_vram_bytes(m, l));
    }
    rest_vram[d] = rest_vram[d + 1] + min_vram;
  }
  cur.assign(p.models(), kAbsent);
}

// The least load the active models other than m can add up to.
std::vector<float> ExactSearch::least_others(std::size_t m) const {
  std::vector<float> others(dims, 0);
  for (auto k : p.active_models()) {
    if (k == m) continue;
    for (std::size_t d = 0; d < dims; ++d) others[d] += cmin[k][d];
  }
  return others;
}

void ExactSearch::directions() {
  std::vector<float> spread(dims, 0);  // mean over models of the largest extra load
  const auto active = static_cast<float>(p.active_models().size());
  for (auto m : p.active_models()) {
    for (std::size_t k = 0; k < dims; ++k) {
      float hi = 0;
      for (const auto& cl : c[m]) hi = std::max(hi, cl[k] - cmin[m][k]);
      spread[k] += hi / active;
    }
  }
  std::vector<float> diagonal(dims, 0);
  for (std::size_t k = 0; k < dims; ++k) {
    if (!(spread[k] > 0)) continue;
    dirs.emplace_back(dims, 0.0f);
    dirs.back()[k] = 1;
    diagonal[k] = spread[k];
  }
  if (dirs.size() > 1) dirs.insert(dirs.begin(), diagonal);  // tried first: prunes most
  // Each pair of axes in their typical mix: a relaxation along one axis alone ignores what
  // the other adds, and the diagonal dilutes both with the rest (on scale-n12 a pair
  // proves the most cuts of all, and the proof visits 24k nodes instead of 55k).
  std::vector<std::size_t> axes;
  for (std::size_t k = 0; k < dims; ++k) {
    if (spread[k] > 0) axes.push_back(k);
  }
  for (std::size_t a = 0; axes.size() > 2 && a < axes.size(); ++a) {
    for (std::size_t b = a + 1; b < axes.size(); ++b) {
      dirs.emplace_back(dims, 0.0f);
      dirs.back()[axes[a]] = spread[axes[a]];
      dirs.back()[axes[b]] = spread[axes[b]];
    }
  }
  dir_tried.assign(dirs.size(), 0);
  dir_cut.assign(dirs.size(), 0);
  active_dirs.resize(dirs.size());
  std::iota(active_dirs.begin(), active_dirs.end(), 0);
}

// The extent of configuration l of model m along direction j: the largest t such that its
// extra load (above the model's least) dominates t * dirs[j]. Any set of configurations
// then adds at least (sum of their extents) * dirs[j] to the load, which is what makes
// the one-dimensional relaxations in can_beat() valid.
double ExactSearch::extent(std::size_t m, std::size_t l, std::size_t j) const {
  double t = std::numeric_limits<double>::infinity();
  for (std::size_t k = 0; k < dims; ++k) {
    if (dirs[j][k] > 0) t = std::min(t, double(c[m][l][k] - cmin[m][k]) / dirs[j][k]);
  }
  return std::max(0.0, t);
}

// Ceilings: along each direction j, with the others at their least, the largest total
// extent (of the whole plan, model m's included) under which configuration l still meets
// its SLA, by bisection; +inf when even the others' largest extents are tolerated. The
// upper ends of the bisection are kept, so a ceiling never understates the truth. Being
// computed where the load is least, they hold at every node of the search.
void ExactSearch::ceilings() {
  const std::size_t n = p.models();
  const std::size_t nd = dirs.size();
  ext.assign(n, {});
  theta.assign(n, {});
  for (auto m : p.active_models()) {
    ext[m].assign(p.local_count(m), std::vector<double>(nd, 0));
    for (std::size_t l = 0; l < p.local_count(m); ++l) {
      for (std::size_t j = 0; j < nd; ++j) ext[m][l][j] = extent(m, l, j);
    }
  }
  std::vector<float> probe(dims);
  for (auto m : p.active_models()) {
    const std::vector<float> others = least_others(m);
    theta[m].assign(p.local_count(m),
                    std::vector<double>(nd, std::numeric_limits<double>::infinity()));
    for (std::size_t j = 0; j < nd; ++j) {
      double most = 0;  // the others' largest total extent
      for (auto k : p.active_models()) {
        if (k == m) continue;
        double hi = 0;
        for (const auto& e : ext[k]) hi = std::max(hi, e[j]);
        most += hi;
      }
      if (!(most > 0)) continue;
      for (auto l : cands[m]) {
        auto feasible_at = [&](double t) {
          for (std::size_t k = 0; k < dims; ++k) {
            probe[k] = others[k] + static_cast<float>(t * dirs[j][k]);
          }
          ++evaluated;
          return p.excess(m, l, optimistic(m, l, probe)) == 0;
        };
        if (feasible_at(most)) continue;
        double lo = 0, hi = most;
        for (int it = 0; it < 12; ++it) {
          const double mid = 0.5 * (lo + hi);
          (feasible_at(mid) ? lo : hi) = mid;
        }
        const auto lu = static_cast<std::size_t>(l);
        theta[m][lu][j] = hi + ext[m][lu][j];
      }
    }
  }
}

}  // namespace corun::detail

// Exact branch and bound over a mean-field (aggregate) predictor.
//
// It rests on one property, which AggregatePredictor promises: a model's latency never falls
// and its throughput never rises when the others' aggregate contribution grows. Hence, with
// some models still unassigned, each assigned model's metrics are bounded by predicting it
// against the assigned models' exact contributions plus the *smallest* contribution each
// unassigned model can make. If that optimistic prediction already breaks an SLA, no
// completion can repair it (prune); if the optimistic utility of the assigned models plus the
// best standalone-bound utility of the unassigned ones cannot beat the incumbent, prune too.
// Children are tried best bound first, and the incumbent starts from the GA's answer, so most
// of the tree is never visited. Forward checking filters the unassigned models' domains at
// every node, which is what makes N = 12 tractable. When the search finishes, the answer is optimal under the
// predictor (stats.proved_optimal).
#include <algorithm>
#include <chrono>
#include <limits>
#include <numeric>

#include "search.h"

namespace corun {
namespace {

constexpr std::uint64_t kNodeBudget = 200'000'000;

class ExactSolver final : public Solver {
 public:
  [[nodiscard]] std::string_view name() const override { return "exact"; }

  Result<PlanResult> solve(const PlanProblem& p, const SolverOptions& o) const override {
    const auto start = std::chrono::steady_clock::now();
    const auto* agg = dynamic_cast<const AggregatePredictor*>(&p.predictor());
    if (agg == nullptr) {
      return Error("the exact solver needs a mean-field (aggregate) predictor; this surrogate "
                   "is not one (use exhaustive or ga)");
    }
    if (p.active_models().empty()) return Error("no active models to plan");
    Search s(p, *agg);

    auto ga = make_solver("ga");
    auto seed_plan = (*ga)->solve(p, o);
    if (!seed_plan) return seed_plan.error();
    if (seed_plan->feasible) {
      s.best_utility = seed_plan->utility;
      s.best = seed_plan->config;
    }
    s.run();
    PlanResult r = s.best.empty() ? *seed_plan : evaluate_plan(p, s.best, "exact");
    r.solver = "exact";
    r.stats.evaluated = seed_plan->stats.evaluated + s.evaluated;
    r.stats.nodes = s.nodes;
    r.stats.proved_optimal = s.nodes < kNodeBudget && agg->monotone();
    r.stats.elapsed_ms = detail::ms_since(start);
    return r;
  }

 private:
  struct Search {
    const PlanProblem& p;
    const AggregatePredictor& agg;
    std::size_t dims;
    std::vector<std::size_t> order;                 // active models, branching order
    std::vector<std::vector<std::vector<float>>> c;  // contribution [m][l][k]
    std::vector<std::vector<std::int32_t>> cands;   // surviving local configs, best bound first
    std::vector<std::vector<double>> ub;            // utility bound [m][l]
    std::vector<std::vector<float>> rest_min;       // [depth][k]: min contribution of order[depth..]
    std::vector<double> rest_vram;                  // [depth]: min VRAM of order[depth..]
    double best_utility = -std::numeric_limits<double>::infinity();
    JointConfig best;
    JointConfig cur;
    std::uint64_t nodes = 0;
    std::uint64_t evaluated = 0;

    Search(const PlanProblem& problem, const AggregatePredictor& a)
        : p(problem), agg(a), dims(a.aggregate_dims()) {
      const std::size_t n = p.models();
      c.resize(n);
      cands.resize(n);
      ub.resize(n);
      std::vector<std::vector<float>> cmin(n, std::vector<float>(dims, 0));
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
      for (auto m : p.active_models()) {
        std::vector<float> others(dims, 0);
        for (auto k : p.active_models()) {
          if (k == m) continue;
          for (std::size_t d = 0; d < dims; ++d) others[d] += cmin[k][d];
        }
        const std::size_t count = p.local_count(m);
        ub[m].assign(count, -std::numeric_limits<double>::infinity());
        for (std::size_t l = 0; l < count; ++l) {
          const auto li = static_cast<std::int32_t>(l);
          const Predicted q = agg.predict_given(m, li, others);
          ++evaluated;
          if (sla_excess(p.workload().models[m], q, p.margin(m)) > 0) continue;  // never feasible
          ub[m][l] = p.model_utility(m, li, q);
          cands[m].push_back(li);
        }
        std::sort(cands[m].begin(), cands[m].end(),
                  [&](auto x, auto y) { return ub[m][static_cast<std::size_t>(x)] > ub[m][static_cast<std::size_t>(y)]; });
      }
      // Branch on the most constrained models first (fewest surviving configurations).
      order = p.active_models();
      std::stable_sort(order.begin(), order.end(),
                       [&](auto x, auto y) { return cands[x].size() < cands[y].size(); });
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

    // Optimistic utility of each surviving configuration of each unassigned model, parallel to
    // the `next` domains of the node being expanded (overwritten per node: only read there).
    std::vector<std::vector<double>> value;

    // A tighter bound on what the unassigned models can add. Along each aggregate dimension k,
    // monotonicity caps their combined extra contribution (above their minimum) at the largest
    // T_k every assigned model tolerates with its SLA intact; the best total utility under
    // that cap is a multiple-choice knapsack, bounded by its LP relaxation (greedy over the
    // upper convex hulls of each model's (extra, utility) points). Returns -inf when some
    // model cannot fit at all.
    double knapsack_bound(std::size_t depth, const std::vector<float>& sum,
                          const std::vector<float>& rest,
                          const std::vector<std::vector<std::int32_t>>& next) {
      const std::size_t last = order.size();
      double tightest = std::numeric_limits<double>::infinity();
      std::vector<float> probe(dims);
      for (std::size_t k = 0; k < dims; ++k) {
        double tmax = 0;
        for (std::size_t d = depth + 1; d < last; ++d) {
          const std::size_t u = order[d];
          const double cmin = rest_min[d][k] - rest_min[d + 1][k];
          double w = 0;
          for (auto l : next[u]) w = std::max(w, c[u][static_cast<std::size_t>(l)][k] - cmin);
          tmax += w;
        }
        if (tmax <= 0) continue;
        double cap = tmax;
        for (std::size_t d = 0; d <= depth; ++d) {
          const std::size_t i = order[d];
          const auto& ci = c[i][static_cast<std::size_t>(cur[i])];
          auto feasible_at = [&](double t) {
            for (std::size_t j = 0; j < dims; ++j) probe[j] = sum[j] - ci[j] + rest[j];
            probe[k] += static_cast<float>(t);
            ++evaluated;
            return sla_excess(p.workload().models[i], agg.predict_given(i, cur[i], probe),
                              p.margin(i)) == 0;
          };
          if (feasible_at(cap)) continue;
          double lo = 0, hi = cap;  // feasible at 0: checked by the caller
          for (int it = 0; it < 14; ++it) {
            const double mid = 0.5 * (lo + hi);
            (feasible_at(mid) ? lo : hi) = mid;
          }
          cap = hi;  // conservative: the true tolerance is below hi
        }
        // LP relaxation of the multiple-choice knapsack.
        double total = 0;
        std::vector<std::pair<double, double>> segments;  // (slope, width)
        for (std::size_t d = depth + 1; d < last; ++d) {
          const std::size_t u = order[d];
          const double cmin = rest_min[d][k] - rest_min[d + 1][k];
          std::vector<std::pair<double, double>> pts;  // (extra, utility)
          for (std::size_t x = 0; x < next[u].size(); ++x) {
            const double w = c[u][static_cast<std::size_t>(next[u][x])][k] - cmin;
            if (w <= cap + 1e-12) pts.emplace_back(std::max(0.0, w), value[u][x]);
          }
          if (pts.empty()) return -std::numeric_limits<double>::infinity();
          std::sort(pts.begin(), pts.end(), [](const auto& a, const auto& b) {
            return a.first < b.first || (a.first == b.first && a.second > b.second);
          });
          std::vector<std::pair<double, double>> hull = {pts[0]};
          for (std::size_t x = 1; x < pts.size(); ++x) {
            if (pts[x].second <= hull.back().second) continue;
            while (hull.size() >= 2) {
              const auto& a = hull[hull.size() - 2];
              const auto& b = hull.back();
              // Drop b when it lies on or under the chord from a to the new point.
              if ((b.second - a.second) * (pts[x].first - a.first) <=
                  (pts[x].second - a.second) * (b.first - a.first)) {
                hull.pop_back();
              } else {
                break;
              }
            }
            hull.push_back(pts[x]);
          }
          total += hull[0].second;
          cap -= hull[0].first;
          for (std::size_t x = 1; x < hull.size(); ++x) {
            const double w = hull[x].first - hull[x - 1].first;
            const double dv = hull[x].second - hull[x - 1].second;
            segments.emplace_back(w > 0 ? dv / w : std::numeric_limits<double>::infinity(), w);
          }
        }
        if (cap < -1e-12) return -std::numeric_limits<double>::infinity();
        std::sort(segments.begin(), segments.end(), [](const auto& a, const auto& b) {
          return a.first > b.first;
        });
        for (const auto& [slope, w] : segments) {
          if (w <= cap) {
            total += std::isinf(slope) ? 0 : slope * w;
            cap -= w;
          } else {
            total += slope * cap;
            break;
          }
        }
        tightest = std::min(tightest, total);
      }
      return tightest;
    }

    void run() {
      std::vector<float> sum(dims, 0);
      std::vector<std::vector<std::int32_t>> domains(p.models());
      for (auto m : order) domains[m] = cands[m];
      dfs(0, sum, 0.0, domains);
    }

    // Assigns order[depth]. `domains` holds, for every unassigned model, the configurations
    // that can still meet their SLA given the assignments so far (forward checking).
    void dfs(std::size_t depth, std::vector<float>& sum, double vram,
             const std::vector<std::vector<std::int32_t>>& domains) {
      if (nodes >= kNodeBudget) return;
      const std::size_t m = order[depth];
      const std::size_t last = order.size();
      const double capacity = p.workload().device.vram_bytes();
      std::vector<float> others(dims);
      std::vector<float> rest(dims);
      std::vector<std::vector<std::int32_t>> next(p.models());
      value.resize(p.models());
      for (auto l : domains[m]) {
        ++nodes;
        const auto lu = static_cast<std::size_t>(l);
        const double v = vram + p.space().local_vram_bytes(m, lu);
        if (v + rest_vram[depth + 1] > capacity) continue;
        for (std::size_t k = 0; k < dims; ++k) sum[k] += c[m][lu][k];
        cur[m] = l;
        bool ok = true;
        // Forward checking: filter every unassigned model's domain against the assigned load
        // plus the least the other unassigned models can add; keep its best utility bound.
        double bound = 0;
        rest = rest_min[depth + 1];
        for (std::size_t d = depth + 1; d < last && ok; ++d) {
          const std::size_t u = order[d];
          const auto& cmin_u = rest_min[d];
          const auto& cmin_next = rest_min[d + 1];
          for (std::size_t k = 0; k < dims; ++k) {
            others[k] = sum[k] + rest[k] - (cmin_u[k] - cmin_next[k]);
          }
          next[u].clear();
          value[u].clear();
          double best_u = -std::numeric_limits<double>::infinity();
          for (auto lu2 : domains[u]) {
            const Predicted q = agg.predict_given(u, lu2, others);
            ++evaluated;
            if (sla_excess(p.workload().models[u], q, p.margin(u)) > 0) continue;
            next[u].push_back(lu2);
            value[u].push_back(p.model_utility(u, lu2, q));
            best_u = std::max(best_u, value[u].back());
          }
          if (next[u].empty()) ok = false;
          bound += best_u;
        }
        const double unassigned_bound = bound;
        // Optimistic metrics of every assigned model; prune on a certain SLA breach or bound.
        for (std::size_t d = 0; d <= depth && ok; ++d) {
          const std::size_t i = order[d];
          const auto li = static_cast<std::size_t>(cur[i]);
          for (std::size_t k = 0; k < dims; ++k) others[k] = sum[k] - c[i][li][k] + rest[k];
          const Predicted q = agg.predict_given(i, cur[i], others);
          ++evaluated;
          if (sla_excess(p.workload().models[i], q, p.margin(i)) > 0) ok = false;
          bound += p.model_utility(i, cur[i], q);
        }
        if (ok && bound > best_utility + 1e-12 && depth + 1 < last) {
          bound = std::min(bound, bound - unassigned_bound + knapsack_bound(depth, sum, rest, next));
        }
        if (ok && bound > best_utility + 1e-12) {
          if (depth + 1 == last) {
            best_utility = bound;  // with nothing unassigned the bound is exact
            best = cur;
          } else {
            dfs(depth + 1, sum, v, next);
          }
        }
        for (std::size_t k = 0; k < dims; ++k) sum[k] -= c[m][lu][k];
        cur[m] = kAbsent;
      }
    }
  };
};

}  // namespace

std::unique_ptr<Solver> make_exact_solver() { return std::make_unique<ExactSolver>(); }

}  // namespace corun

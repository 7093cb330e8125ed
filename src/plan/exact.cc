// Exact branch and bound over a mean-field (aggregate) predictor.
//
// It rests on one property, which AggregatePredictor promises: a model's latency never falls
// and its throughput never rises when the others' aggregate contribution grows. Hence, with
// some models still unassigned, each assigned model's metrics are bounded by predicting it
// against the assigned models' exact contributions plus the *smallest* contribution each
// unassigned model can make. If that optimistic prediction already breaks an SLA, no
// completion can repair it (prune). Forward checking filters the unassigned models' domains
// the same way at every node and keeps each surviving configuration's optimistic utility
// (lazily: one worth no more than a configuration already checked cannot move the bound of
// 2. below; bound 3. first runs with it at its parent's bound, and only a node that this does
// not cut checks it and runs bound 3. again).
// Three bounds then cut the tree, cheapest first:
//  1. the parent's optimistic utilities (still valid below it, as loads only grow): children
//     are tried in their order and the rest are cut at the first that cannot beat the
//     incumbent, before any prediction;
//  2. assigned optimistic utilities plus each unassigned model's best surviving one;
//  3. can_beat(): one-dimensional relaxations of the shared load along a few directions (each
//     load axis, their typical mix and each pair of axes; those that cut are tried first), each
//     a multiple-choice knapsack bounded by its LP relaxation.
// Every feasibility check and optimistic utility goes through a small memo per (model,
// configuration) of loads borne and not borne (bears()): monotonicity answers most of them.
// The incumbent starts from the GA's answer. When the search finishes, the answer is optimal
// under the predictor (stats.proved_optimal). With more than one thread the subtrees below
// depth 1 are split among them (run_split): the same plan, whatever the number of threads.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <mutex>
#include <numeric>
#include <thread>

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
      return Error(
          "the exact solver needs a mean-field (aggregate) predictor; this surrogate "
          "is not one (use exhaustive or ga)");
    }
    if (p.active_models().empty()) return Error("no active models to plan");
    Search s(p, *agg);

    const auto ga = detail::make_ga_solver(false);
    auto seed_plan = ga->solve(p, o);
    if (!seed_plan) return seed_plan.error();
    if (seed_plan->feasible) {
      s.best_utility = seed_plan->utility;
      s.best = seed_plan->config;
    }
    // A model none of whose configurations meets its SLA even with every other model at its
    // lightest cannot be planned: no feasible plan exists under the predictor (proved), and
    // the GA's least-violating plan is the answer.
    const bool plannable = std::none_of(p.active_models().begin(), p.active_models().end(),
                                        [&](std::size_t m) { return s.cands[m].empty(); });
    if (plannable) s.run_split(o.threads);
    PlanResult r = s.best.empty() ? *seed_plan : evaluate_plan(p, s.best, "exact");
    r.solver = "exact";
    r.stats.evaluated = seed_plan->stats.evaluated + s.evaluated;
    r.stats.nodes = s.nodes;
    r.stats.proved_optimal = s.nodes < s.budget && agg->monotone();
    r.stats.elapsed_ms = detail::ms_since(start);
    return r;
  }

 public:
  struct Search {
    const PlanProblem& p;
    const AggregatePredictor& agg;
    // Whether bears() may answer from its memo: a monotone predictor's (and not in the memo's
    // reference search, detail::bounded_search(..., recall = false)).
    bool recall;
    std::size_t dims;
    std::vector<std::size_t> order;                  // active models, branching order
    std::vector<std::vector<std::vector<float>>> c;  // contribution [m][l][k]
    std::vector<std::vector<float>> cmin;            // least contribution [m][k]
    std::vector<std::vector<std::int32_t>> cands;    // surviving local configs, best bound first
    std::vector<std::vector<double>> ub;             // utility bound [m][l]
    std::vector<std::vector<float>> rest_min;  // [depth][k]: min contribution of order[depth..]
    std::vector<double> rest_vram;             // [depth]: min VRAM of order[depth..]
    // Load directions of the relaxation in can_beat(): each aggregate axis along which some
    // configuration adds more than the least, plus their typical mix (the diagonal).
    std::vector<std::vector<float>> dirs;
    std::vector<std::vector<std::vector<double>>> ext;    // [m][l][j]: see extent()
    std::vector<std::vector<std::vector<double>>> theta;  // [m][l][j]: see ceilings()
    // A configuration of an unassigned model in can_beat(): its extent along one direction,
    // its optimistic utility, and its ceiling there.
    struct Item {
      double w, v, theta;
    };
    double best_utility = -std::numeric_limits<double>::infinity();
    JointConfig best;
    JointConfig cur;
    std::uint64_t budget = kNodeBudget;  // nodes the search may visit
    std::uint64_t nodes = 0;
    std::uint64_t evaluated = 0;

    // Every bound predicts against a load shrunk by detail::kBoundSlack; complete plans are
    // judged by the predictor itself (evaluate_plan).
    std::vector<float> shrunk = std::vector<float>(dims);
    Predicted optimistic(std::size_t m, std::int32_t l, std::span<const float> load) {
      for (std::size_t k = 0; k < dims; ++k) shrunk[k] = load[k] * (1 - detail::kBoundSlack);
      return agg.predict_given(m, l, shrunk);
    }

    // Whether model m in configuration l meets its SLA (optimistically) under `load`, and then
    // its optimistic utility in `value` (when asked), with a memo of the loads it was last seen
    // to bear and not to bear. Under a monotone predictor a load below one it bears is borne,
    // and one above a load it does not bear is not; where the utility it had under a borne
    // load was its bound ub (that of the least load), the utility under any load between is ub
    // too (and always a valid bound). So the memo answers as a prediction would (the utility up
    // to the float rounding of the loads): the same search for fewer predictions (on
    // bench_plan's scale-n12, 0.50 M instead of 1.26 M, and the same 24.2k nodes).
    static constexpr std::size_t kMemo = 4;
    struct Memo {
      std::vector<float> ok, bad;  // kMemo loads each, dims floats a load
      std::uint8_t n_ok = 0, n_bad = 0, next_ok = 0, next_bad = 0;
      std::uint8_t at_ub = 0;  // bit s: the utility under ok load s was ub
    };
    std::vector<std::vector<Memo>> memo;  // [m][l]
    bool bears(std::size_t m, std::int32_t l, std::span<const float> load,
               double* value = nullptr) {
      const auto lu = static_cast<std::size_t>(l);
      Memo& e = memo[m][lu];
      if (recall) {
        for (std::size_t s = 0; s < e.n_ok; ++s) {
          if (value != nullptr && (e.at_ub >> s & 1) == 0) continue;
          const float* x = &e.ok[s * dims];
          std::size_t k = 0;
          while (k < dims && load[k] <= x[k]) ++k;
          if (k == dims) {
            if (value != nullptr) *value = ub[m][lu];
            return true;
          }
        }
        for (std::size_t s = 0; s < e.n_bad; ++s) {
          const float* x = &e.bad[s * dims];
          std::size_t k = 0;
          while (k < dims && load[k] >= x[k]) ++k;
          if (k == dims) {
            return false;
          }
        }
      }
      ++evaluated;
      const Predicted q = optimistic(m, l, load);
      const bool ok = p.excess(m, l, q) == 0;
      const double v = ok ? p.model_utility(m, l, q) : 0;
      if (value != nullptr) *value = v;
      auto& slots = ok ? e.ok : e.bad;
      auto& n = ok ? e.n_ok : e.n_bad;
      auto& next = ok ? e.next_ok : e.next_bad;
      if (slots.empty()) slots.resize(kMemo * dims);
      std::copy(load.begin(), load.end(), slots.begin() + static_cast<std::ptrdiff_t>(next * dims));
      if (ok) {
        const auto bit = static_cast<std::uint8_t>(1u << next);
        e.at_ub = static_cast<std::uint8_t>(v == ub[m][lu] ? e.at_ub | bit : e.at_ub & ~bit);
      }
      next = static_cast<std::uint8_t>((next + 1) % kMemo);
      n = static_cast<std::uint8_t>(std::min<std::size_t>(n + 1, kMemo));
      return ok;
    }

    Search(const PlanProblem& problem, const AggregatePredictor& a)
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
    std::vector<float> least_others(std::size_t m) const {
      std::vector<float> others(dims, 0);
      for (auto k : p.active_models()) {
        if (k == m) continue;
        for (std::size_t d = 0; d < dims; ++d) others[d] += cmin[k][d];
      }
      return others;
    }

    void directions() {
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

    // Directions are tried in the order of the cuts they proved so far, and one that proved
    // under 0.5 % of its first kProbation tries is dropped: a direction that does not cut costs
    // a prediction per assigned model at every node. Deterministic: it depends only on the
    // search so far. Dropping a direction only weakens the bound. On scale-n12 (bench_plan)
    // this proof visits the 23.6k nodes of trying every direction with 0.53x the predictions;
    // after 512 tries it dropped directions that cut later on (59k nodes).
    static constexpr std::uint64_t kProbation = 2048;
    // A split search's workers each keep their own statistics: each judges a direction on
    // kProbation / workers tries, so that together they spend on probation what one search does
    // (each redoing all of it cost 1.48 M predictions at N = 12 against 1.28 M, 23.9k nodes
    // against 24.2k).
    std::uint64_t probation = kProbation;
    std::vector<std::uint64_t> dir_tried, dir_cut;  // per direction
    std::vector<std::size_t> active_dirs;
    std::uint64_t calls = 0;
    void rank_directions() {
      std::erase_if(active_dirs, [&](std::size_t j) {
        return dir_tried[j] >= probation &&
               dir_cut[j] * 200 < dir_tried[j];  // under 0.5 % of tries
      });
      std::stable_sort(active_dirs.begin(), active_dirs.end(), [&](std::size_t a, std::size_t b) {
        return dir_cut[a] * (dir_tried[b] + 1) > dir_cut[b] * (dir_tried[a] + 1);
      });
    }

    // The extent of configuration l of model m along direction j: the largest t such that its
    // extra load (above the model's least) dominates t * dirs[j]. Any set of configurations
    // then adds at least (sum of their extents) * dirs[j] to the load, which is what makes
    // the one-dimensional relaxations in can_beat() valid.
    double extent(std::size_t m, std::size_t l, std::size_t j) const {
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
    void ceilings() {
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

    // Whether the unassigned models can add more than `need` utility. Each direction j gives
    // a one-dimensional relaxation. Let W be the unassigned models' total extent along j and
    // A the assigned models'. Monotonicity gives two kinds of ceiling: the assigned models,
    // loaded with their exact contributions plus the unassigned models' least, tolerate W up
    // to some `cap`; and an unassigned model u in configuration x tolerates A + W up to
    // theta[u][x][j]. For each level L of A + W the bound is a multiple-choice knapsack over
    // the configurations with theta >= L, capacity L - A, which its LP relaxation bounds;
    // between two consecutive thetas the admitted set is fixed and the bound grows with L.
    // Walking the levels upwards gives the least L0 at which the bound could exceed `need`
    // without any prediction; the assigned models are then checked once, at W = L0 - A: if
    // one cannot bear it, cap < L0 - A and the direction proves the cut. Returns false when
    // some direction proves that no completion beats `need`.
    bool can_beat(std::size_t depth, const std::vector<float>& sum, const std::vector<float>& rest,
                  const std::vector<std::vector<std::int32_t>>& next,
                  const std::vector<std::vector<double>>& value, double need) {
      const std::size_t last = order.size();
      const std::size_t count = last - depth - 1;
      std::vector<float> probe(dims);
      std::vector<std::vector<Item>> items(count);
      std::vector<double> levels;
      std::vector<std::pair<double, double>> pts, hull, segments;
      if (++calls % 256 == 0) rank_directions();
      for (const std::size_t j : active_dirs) {
        ++dir_tried[j];
        double tmax = 0;
        for (std::size_t d = depth + 1; d < last; ++d) {
          const std::size_t u = order[d];
          double w = 0;
          for (auto l : next[u]) w = std::max(w, ext[u][static_cast<std::size_t>(l)][j]);
          tmax += w;
        }
        if (tmax <= 0) continue;
        double assigned = 0;
        for (std::size_t d = 0; d <= depth; ++d) {
          assigned += ext[order[d]][static_cast<std::size_t>(cur[order[d]])][j];
        }
        const double top = assigned + tmax;
        levels.assign(1, top);
        for (std::size_t d = depth + 1; d < last; ++d) {
          const std::size_t u = order[d];
          auto& group = items[d - depth - 1];
          group.clear();
          for (std::size_t x = 0; x < next[u].size(); ++x) {
            const auto lx = static_cast<std::size_t>(next[u][x]);
            const double th = theta[u][lx][j];
            group.push_back({ext[u][lx][j], value[u][x], th});
            if (th < top && th >= assigned) levels.push_back(th);
          }
        }
        std::sort(levels.begin(), levels.end());
        levels.erase(std::unique(levels.begin(), levels.end()), levels.end());
        // Up the levels: `below` is a total extent up to which nothing beats `need`; `first`
        // a lower bound of the least total at which the unassigned models could.
        double below = assigned;
        double first = std::numeric_limits<double>::infinity();
        for (const double level : levels) {
          const double room = level - assigned;
          // Quick check: the best admitted value of each model, ignoring the capacity.
          double quick = 0;
          for (const auto& group : items) {
            double b = -std::numeric_limits<double>::infinity();
            for (const auto& e : group) {
              if (e.theta >= level && e.w <= room + 1e-12) b = std::max(b, e.v);
            }
            quick += b;
          }
          double least_room = 0;
          if (quick > need &&
              lp_knapsack(items, level, room, need, least_room, pts, hull, segments) > need) {
            first = std::max(below, assigned + least_room);
            break;
          }
          below = level;
        }
        if (std::isinf(first)) {
          ++dir_cut[j];
          return false;
        }
        // Every total extent that could beat `need` is at least `first`. If an assigned model
        // cannot bear the unassigned models' extent that `first` implies, it bears none of
        // them (monotonicity), and this direction proves the cut.
        const double t = first - assigned;
        if (t <= 0) continue;  // bearable: checked by the caller
        for (std::size_t d = 0; d <= depth; ++d) {
          const std::size_t i = order[d];
          const auto& ci = c[i][static_cast<std::size_t>(cur[i])];
          for (std::size_t k = 0; k < dims; ++k) {
            probe[k] = sum[k] - ci[k] + rest[k] + static_cast<float>(t * dirs[j][k]);
          }
          if (!bears(i, cur[i], probe)) {
            ++dir_cut[j];
            return false;
          }
        }
      }
      return true;
    }

    // LP relaxation of the multiple-choice knapsack: one item per group, among those with
    // theta >= level, total weight at most `room`. -inf when a group has no admissible item.
    static double lp_knapsack(const std::vector<std::vector<Item>>& items, double level,
                              double room, double need, double& least_room,
                              std::vector<std::pair<double, double>>& pts,
                              std::vector<std::pair<double, double>>& hull,
                              std::vector<std::pair<double, double>>& segments) {
      double total = 0;
      double cap = room;
      segments.clear();
      for (const auto& group : items) {
        pts.clear();
        for (const auto& e : group) {
          if (e.theta >= level && e.w <= room + 1e-12) pts.emplace_back(e.w, e.v);
        }
        if (pts.empty()) return -std::numeric_limits<double>::infinity();
        std::sort(pts.begin(), pts.end(), [](const auto& a, const auto& b) {
          return a.first < b.first || (a.first == b.first && a.second > b.second);
        });
        hull.assign(1, pts[0]);
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
      std::sort(segments.begin(), segments.end(),
                [](const auto& a, const auto& b) { return a.first > b.first; });
      // The least capacity at which the relaxation exceeds `need` (+inf if none does): the
      // relaxation's value grows piecewise linearly with capacity, segment by segment.
      least_room = std::numeric_limits<double>::infinity();
      {
        double v = total, used = room - cap;
        if (v > need) {
          least_room = used;
        } else {
          for (const auto& [slope, w] : segments) {
            if (v + slope * w > need) {
              least_room = used + (need - v) / slope;
              break;
            }
            v += slope * w;
            used += w;
          }
        }
      }
      for (const auto& [slope, w] : segments) {
        if (w <= cap) {
          total += std::isinf(slope) ? 0 : slope * w;
          cap -= w;
        } else {
          total += slope * cap;
          break;
        }
      }
      return total;
    }

    // Checks the configurations forward checking left unchecked at this depth (stale): drops
    // those that cannot meet their SLA and gives the others their own bound, so that
    // can_beat() and the children see exactly what checking all of them would have given.
    void settle(std::size_t depth, const std::vector<float>& sum, const std::vector<float>& rest) {
      auto& next = next_at[depth];
      auto& value = value_at[depth];
      auto& stale = stale_at[depth];
      std::vector<float>& others = settle_load;
      for (std::size_t d = depth + 1; d < order.size(); ++d) {
        const std::size_t u = order[d];
        if (std::find(stale[u].begin(), stale[u].end(), 1) == stale[u].end()) continue;
        for (std::size_t k = 0; k < dims; ++k) {
          others[k] = sum[k] + rest[k] - (rest_min[d][k] - rest_min[d + 1][k]);
        }
        std::size_t kept = 0;
        for (std::size_t y = 0; y < next[u].size(); ++y) {
          const std::int32_t l = next[u][y];
          double v = value[u][y];
          if (stale[u][y] != 0 && !bears(u, l, others, &v)) continue;
          next[u][kept] = l;
          value[u][kept] = v;
          ++kept;
        }
        next[u].resize(kept);
        value[u].resize(kept);
        stale[u].assign(kept, 0);
      }
    }
    std::vector<float> settle_load = std::vector<float>(dims);
    bool has_stale(std::size_t depth) const {
      const auto& stale = stale_at[depth];
      for (std::size_t d = depth + 1; d < order.size(); ++d) {
        const auto& s = stale[order[d]];
        if (std::find(s.begin(), s.end(), 1) != s.end()) return true;
      }
      return false;
    }

    // Per depth: the surviving domains and optimistic utilities handed to the children.
    std::vector<std::vector<std::vector<std::int32_t>>> next_at;
    std::vector<std::vector<std::vector<double>>> value_at;
    std::vector<std::vector<std::vector<std::uint8_t>>> stale_at;  // [depth][m][x]: unchecked
    std::vector<std::vector<float>> sum_at;  // assigned load at each depth

    void run() {
      const std::vector<float> none(dims, 0);
      sum_at.assign(order.size(), std::vector<float>(dims, 0));
      std::vector<std::vector<std::int32_t>> domains(p.models());
      std::vector<std::vector<double>> values(p.models());
      for (auto m : order) {
        domains[m] = cands[m];
        for (auto l : cands[m]) values[m].push_back(ub[m][static_cast<std::size_t>(l)]);
      }
      next_at.assign(order.size(), std::vector<std::vector<std::int32_t>>(p.models()));
      value_at.assign(order.size(), std::vector<std::vector<double>>(p.models()));
      stale_at.assign(order.size(), std::vector<std::vector<std::uint8_t>>(p.models()));
      dfs(0, none, 0.0, domains, values, 0.0);
    }

    // Assigns order[depth]. `domains` holds, for every unassigned model, the configurations
    // that can still meet their SLA given the assignments so far (forward checking), and
    // `values` their optimistic utilities; `assigned` is the assigned models' optimistic
    // utility. These bounds only tighten further down, so a child whose bound from them
    // cannot beat the incumbent is cut before any prediction, and so are the children after
    // it (tried in order of that bound).
    void dfs(std::size_t depth, const std::vector<float>& parent_sum, double vram,
             const std::vector<std::vector<std::int32_t>>& domains,
             const std::vector<std::vector<double>>& values, double assigned) {
      if (nodes >= budget) return;
      const std::size_t m = order[depth];
      const std::size_t last = order.size();
      const double capacity = p.workload().device.vram_bytes();
      std::vector<float> others(dims);
      std::vector<float> rest(dims);
      auto& next = next_at[depth];
      auto& value = value_at[depth];
      auto& stale = stale_at[depth];
      auto& sum = sum_at[depth];
      double rest_best = 0;  // the unassigned models' best optimistic utility, m excluded
      for (std::size_t d = depth + 1; d < last; ++d) {
        const auto& vu = values[order[d]];
        rest_best += *std::max_element(vu.begin(), vu.end());
      }
      std::vector<std::size_t> tried(domains[m].size());
      std::iota(tried.begin(), tried.end(), 0);
      std::stable_sort(tried.begin(), tried.end(),
                       [&](auto x, auto y) { return values[m][x] > values[m][y]; });
      // One child: the configuration domains[m][x] of m, its bounds, and its subtree.
      auto visit = [&](std::size_t x) {
        const std::int32_t l = domains[m][x];
        ++nodes;
        const auto lu = static_cast<std::size_t>(l);
        const double v = vram + p.space().local_vram_bytes(m, lu);
        if (v + rest_vram[depth + 1] > capacity) return;
        // The assigned load, added afresh from the parent's (an add-then-subtract in place
        // would drift over millions of nodes).
        for (std::size_t k = 0; k < dims; ++k) sum[k] = parent_sum[k] + c[m][lu][k];
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
          stale[u].clear();
          double best_u = -std::numeric_limits<double>::infinity();
          const auto& du = domains[u];
          const auto& vu = values[u];
          for (std::size_t y = 0; y < du.size(); ++y) {
            const std::int32_t lu2 = du[y];
            // Worth no more than a configuration already checked: it cannot change this
            // model's bound, so it keeps its parent's (still valid) until can_beat() needs it.
            if (vu[y] <= best_u) {
              next[u].push_back(lu2);
              value[u].push_back(vu[y]);
              stale[u].push_back(1);
              continue;
            }
            double vy = 0;
            if (!bears(u, lu2, others, &vy)) continue;
            next[u].push_back(lu2);
            value[u].push_back(vy);
            stale[u].push_back(0);
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
          double vi = 0;
          ok = bears(i, cur[i], others, &vi);
          bound += vi;
        }
        if (ok && bound > best_utility + 1e-12 && depth + 1 < last) {
          const double need = best_utility + 1e-12 - (bound - unassigned_bound);
          // First with the unchecked configurations at their parents' bounds (valid, looser);
          // only a node that this does not cut pays for checking them and tries again.
          const bool stale_left = has_stale(depth);
          if (stale_left && !can_beat(depth, sum, rest, next, value, need)) {
            ok = false;
          } else {
            settle(depth, sum, rest);
            if (!can_beat(depth, sum, rest, next, value, need)) ok = false;
          }
        }
        if (ok && bound > best_utility + 1e-12) {
          if (depth + 1 == last) {
            const PlanResult r = evaluate_plan(p, cur, "exact");
            ++evaluated;
            if (r.feasible && r.utility > best_utility) {
              best_utility = r.utility;
              best = cur;
            }
          } else {
            dfs(depth + 1, sum, v, next, value, bound - unassigned_bound);
          }
        }
        cur[m] = kAbsent;
      };
      for (const std::size_t x : tried) {
        if (!(assigned + values[m][x] + rest_best > best_utility + 1e-12)) break;
        if (split == nullptr || depth != split->depth) {
          visit(x);
          continue;
        }
        // A task of the split search: every worker meets every task, in the same order, and
        // runs those dealt to it (round robin).
        const std::size_t k = task++;
        if (k % split->workers != worker) continue;
        task_run(k, [&] { visit(x); });
      }
    }

    // The split search (run_split): the subtrees of the nodes at depth `split->depth` are tasks,
    // dealt round robin to the workers. Each worker walks the levels above on its own copy, all
    // alike (with the seed incumbent and the direction statistics of those levels only), and
    // runs its tasks in order with its own incumbent and statistics carried from task to task.
    // What it finds and spends depends on the number of workers only, never on the timing.
    struct Split {
      std::size_t depth = 0;
      std::size_t workers = 1;
      struct Task {
        // The worker's incumbent after the task, where the task improved it (else -inf).
        double utility = -std::numeric_limits<double>::infinity();
        JointConfig best;
        std::uint64_t nodes = 0, evaluated = 0;
      };
      std::mutex mutex;                   // guards `tasks`
      std::map<std::size_t, Task> tasks;  // by task index
    };
    Split* split = nullptr;
    std::size_t worker = 0;
    std::size_t task = 0;                              // index of the next task this worker meets
    std::uint64_t task_nodes = 0, task_evaluated = 0;  // spent inside this worker's tasks
    // The worker's own state, swapped in for its tasks.
    struct Own {
      double utility = -std::numeric_limits<double>::infinity();
      JointConfig best;
      std::vector<std::uint64_t> tried, cut;
      std::vector<std::size_t> active;
      std::uint64_t calls = 0;
    } own;

    void swap_own() {
      std::swap(best_utility, own.utility);
      std::swap(best, own.best);
      std::swap(dir_tried, own.tried);
      std::swap(dir_cut, own.cut);
      std::swap(active_dirs, own.active);
      std::swap(calls, own.calls);
    }

    template <class Body>
    void task_run(std::size_t k, Body body) {
      swap_own();
      const double before = best_utility;
      const std::uint64_t n0 = nodes, e0 = evaluated;
      body();
      Split::Task t;
      if (best_utility > before) {
        t.utility = best_utility;
        t.best = best;
      }
      t.nodes = nodes - n0;
      t.evaluated = evaluated - e0;
      task_nodes += t.nodes;
      task_evaluated += t.evaluated;
      {
        std::lock_guard<std::mutex> lock(split->mutex);
        split->tasks.emplace(k, std::move(t));
      }
      swap_own();
    }

    // The search split over `workers` threads (this one included) at depth 1. The plan is the
    // sequential search's (the first of the best plans in search order), whatever the number of
    // workers; the statistics depend on that number only.
    void run_split(int workers) {
      if (workers <= 1 || order.size() < 3) {
        run();
        return;
      }
      Split sp;
      sp.depth = 1;
      sp.workers = static_cast<std::size_t>(workers);
      const std::uint64_t n0 = nodes, e0 = evaluated;
      own = Own{best_utility, best, dir_tried, dir_cut, active_dirs, calls};
      split = &sp;
      std::vector<Search> copies(sp.workers - 1, *this);
      std::vector<std::thread> pool;
      probation = kProbation / sp.workers;
      for (std::size_t w = 0; w < copies.size(); ++w) {
        copies[w].probation = probation;
        copies[w].worker = w + 1;
        pool.emplace_back([&copies, w] { copies[w].run(); });
      }
      run();
      for (auto& t : pool) t.join();
      // The levels above the tasks were walked by every worker alike: counted once (this one's).
      nodes = n0 + (nodes - n0 - task_nodes);
      evaluated = e0 + (evaluated - e0 - task_evaluated);
      for (const auto& [k, t] : sp.tasks) {
        nodes += t.nodes;
        evaluated += t.evaluated;
        // In task order, a strictly better plan only: the first of the best in search order.
        if (t.utility > best_utility) {
          best_utility = t.utility;
          best = t.best;
        }
      }
      split = nullptr;
    }
  };
};

}  // namespace

namespace detail {

std::optional<BoundedSearch> bounded_search(const PlanProblem& p, const JointConfig& incumbent,
                                            double utility, std::uint64_t node_budget, int workers,
                                            bool recall) {
  const auto* agg = dynamic_cast<const AggregatePredictor*>(&p.predictor());
  if (agg == nullptr || p.active_models().empty()) return std::nullopt;
  ExactSolver::Search s(p, *agg);
  s.best = incumbent;
  s.best_utility = utility;
  s.budget = node_budget;
  s.recall = s.recall && recall;
  const bool plannable = std::none_of(p.active_models().begin(), p.active_models().end(),
                                      [&](std::size_t m) { return s.cands[m].empty(); });
  if (plannable) s.run_split(workers);
  BoundedSearch out;
  out.improved = s.best_utility > utility;
  out.best = std::move(s.best);
  out.nodes = s.nodes;
  out.evaluated = s.evaluated;
  out.finished = s.nodes < s.budget;
  return out;
}

}  // namespace detail

std::unique_ptr<Solver> make_exact_solver() { return std::make_unique<ExactSolver>(); }

}  // namespace corun

// The two baseline searches.
//
// greedy (iGniter-style, Xu et al., TPDS 2023): iGniter places workloads one at a time in
// decreasing order of their lower-bound GPU share and raises each one's share in 2.5 % steps
// until its predicted latency meets the SLO. corun's knobs are discrete, so the same rule
// reads: place models in decreasing order of standalone load (predicted alone at their
// heaviest configuration); each takes the highest-utility local configuration for which every
// model placed so far still meets its SLA under the predictor; if none does, the least
// violating one. One pass, no backtracking.
//
// hillclimb (Triton Model Analyzer "quick search"): coordinate hill climbing from 3 initial
// points (the warm start or the all-lowest configuration, plus random ones); a neighbour
// changes one model's local configuration to any other within knob-index distance 3 (L1 over
// that model's knobs); move to the best improving neighbour until none improves.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <numeric>

#include "corun/core/rng.h"
#include "search.h"

namespace corun {
namespace {

class GreedySolver final : public Solver {
 public:
  [[nodiscard]] std::string_view name() const override { return "greedy"; }

  Result<PlanResult> solve(const Context&, const PlanProblem& p,
                           const SolverOptions&) const override {
    const auto start = std::chrono::steady_clock::now();
    const auto& act = p.active_models();
    if (act.empty()) return Error("no active models to plan");
    const std::size_t n = p.models();
    std::uint64_t evaluated = 0;
    std::vector<Predicted> pred(n);
    auto predict = [&](const JointConfig& c) {
      p.predictor().predict(c, 1, pred);
      ++evaluated;
    };
    // Standalone load: predicted latency at the heaviest (highest-quality) configuration.
    std::vector<std::pair<double, std::size_t>> load;
    for (auto m : act) {
      std::int32_t heavy = 0;
      for (std::int32_t l = 0; l < static_cast<std::int32_t>(p.local_count(m)); ++l) {
        if (p.quality(m, l) > p.quality(m, heavy)) heavy = l;
      }
      JointConfig alone(n, kAbsent);
      alone[m] = heavy;
      predict(alone);
      const Predicted& q = pred[m];
      load.emplace_back(-(q.latency_ms_p95 + q.tpot_ms_p95), m);
    }
    std::sort(load.begin(), load.end());
    JointConfig c(n, kAbsent);
    std::vector<std::size_t> placed;
    for (const auto& [neg_load, m] : load) {
      placed.push_back(m);
      double best_utility = -1;
      double best_excess = std::numeric_limits<double>::infinity();
      std::int32_t best_l = 0;
      bool best_ok = false;
      for (std::int32_t l = 0; l < static_cast<std::int32_t>(p.local_count(m)); ++l) {
        c[m] = l;
        predict(c);
        double excess = 0;
        for (auto k : placed) excess += p.excess(k, c[k], pred[k]);
        const bool ok = excess == 0 && p.space().fits_vram(c);
        const double u = p.model_utility(m, l, pred[m]);
        if ((ok && (!best_ok || u > best_utility)) || (!ok && !best_ok && excess < best_excess)) {
          best_ok = ok;
          best_utility = u;
          best_excess = excess;
          best_l = l;
        }
      }
      c[m] = best_l;
    }
    PlanResult r = evaluate_plan(p, c, "greedy");
    r.stats.evaluated = evaluated;
    r.stats.elapsed_ms = detail::ms_since(start);
    return r;
  }
};

class HillClimbSolver final : public Solver {
 public:
  [[nodiscard]] std::string_view name() const override { return "hillclimb"; }

  Result<PlanResult> solve(const Context& ctx, const PlanProblem& p,
                           const SolverOptions& o) const override {
    const auto start = std::chrono::steady_clock::now();
    const auto& act = p.active_models();
    if (act.empty()) return Error("no active models to plan");
    const std::size_t n = p.models();
    Rng rng(derive_seed(ctx.seed, {0x6863}));
    detail::Evaluator eval(p, 256, ctx.threads);
    constexpr int kRadius = 3;
    constexpr int kStarts = 3;

    // Neighbour lists per model: local configurations within knob-index L1 distance kRadius.
    std::vector<std::vector<std::vector<std::int32_t>>> near(n);
    for (auto m : act) {
      const auto& knobs = p.workload().models[m].knobs;
      const std::size_t count = p.local_count(m);
      auto digits = [&](std::size_t l) {
        std::vector<int> d(knobs.size());
        for (std::size_t k = knobs.size(); k-- > 0;) {
          d[k] = static_cast<int>(l % knobs[k].values.size());
          l /= knobs[k].values.size();
        }
        return d;
      };
      near[m].resize(count);
      for (std::size_t a = 0; a < count; ++a) {
        const auto da = digits(a);
        for (std::size_t b = 0; b < count; ++b) {
          if (a == b) continue;
          const auto db = digits(b);
          int dist = 0;
          for (std::size_t k = 0; k < da.size(); ++k) dist += std::abs(da[k] - db[k]);
          if (dist <= kRadius) near[m][a].push_back(static_cast<std::int32_t>(b));
        }
      }
    }

    JointConfig best;
    double best_fit = -std::numeric_limits<double>::infinity();
    for (int s = 0; s < kStarts; ++s) {
      JointConfig c(n, kAbsent);
      if (s == 0) {
        c = o.warm_start ? detail::normalise(p, *o.warm_start) : detail::normalise(p, c);
      } else {
        for (auto m : act) c[m] = static_cast<std::int32_t>(rng.below(p.local_count(m)));
      }
      double f = eval.fitness(c);
      while (true) {
        std::vector<std::int32_t> flat;
        std::vector<std::pair<std::size_t, std::int32_t>> moves;
        for (auto m : act) {
          for (auto l : near[m][static_cast<std::size_t>(c[m])]) {
            JointConfig d = c;
            d[m] = l;
            flat.insert(flat.end(), d.begin(), d.end());
            moves.emplace_back(m, l);
          }
        }
        std::vector<double> fs(moves.size());
        eval.fitness(flat, moves.size(), fs);
        const auto it = std::max_element(fs.begin(), fs.end());
        if (it == fs.end() || *it <= f + 1e-12) break;
        const auto& mv = moves[static_cast<std::size_t>(it - fs.begin())];
        c[mv.first] = mv.second;
        f = *it;
      }
      if (f > best_fit) {
        best_fit = f;
        best = c;
      }
    }
    PlanResult r = evaluate_plan(p, best, "hillclimb");
    r.stats.evaluated = eval.evaluated();
    r.stats.elapsed_ms = detail::ms_since(start);
    return r;
  }
};

}  // namespace

std::unique_ptr<Solver> make_greedy_solver() { return std::make_unique<GreedySolver>(); }
std::unique_ptr<Solver> make_hillclimb_solver() { return std::make_unique<HillClimbSolver>(); }

}  // namespace corun

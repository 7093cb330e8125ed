// Genetic algorithm over joint configurations (one gene per active model: its local index).
//
// Parameters (chosen for N = 5..12 and spaces of 10^4..10^12; see docs/scheduler.md):
//   population 6 N within [48, 96] (a longer genome needs more diversity: at N = 16, 96
//   individuals found a 1.3 % better plan than 48 on bench_plan's scale-n16, at 1.5x the time;
//   the cap bounds the cost of a generation for the larger sets a node search meets); at most 60
//   generations, stopping after 12 without improvement;
//   tournament selection of size 3; uniform crossover with probability 0.9;
//   mutation: each gene re-drawn with probability 1/N (at least one gene per child);
//   elitism: the best 2 survive unchanged;
//   repair: an infeasible child moves one random gene to a lower-quality (lighter) local
//   configuration, up to 2 times, keeping the change only if fitness improves;
//   each generation, and each repair round, is evaluated as one batch;
//   warm start: the plan in force and 7 of its one-gene mutants seed the population;
//   polish: the best individual (for N > 8: each of the 3 best distinct ones) is improved by
//   steepest-ascent one-gene moves, then two-gene moves (N <= 16), until none helps; the best
//   of those local optima of that neighbourhood is kept;
//   bounded branch and bound (N <= 8): the exact solver's search from that plan, cut after
//   3,000 nodes; where it finishes the plan is optimal and proved so.
// Every candidate goes through a memoised, batched evaluator, so repeated genomes are free.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <numeric>
#include <optional>

#include "corun/core/rng.h"
#include "search.h"

namespace corun {
namespace {

constexpr std::size_t kMinPopulation = 48;
constexpr std::size_t kPopulationPerGene = 6;  // individuals per active model beyond N = 8
constexpr std::size_t kMaxPopulation = 96;     // from N = 16 on: bounds a generation's cost
constexpr int kMaxGenerations = 60;
constexpr int kStallGenerations = 12;
constexpr std::size_t kTournament = 3;
constexpr double kCrossoverRate = 0.9;
constexpr std::size_t kElite = 2;
constexpr int kRepairTries = 2;
constexpr std::size_t kWarmMutants = 7;
// Two-gene polish costs O((sum of local counts)^2) per step: only for modest N. At N = 16
// (bench_plan's scale-n16-v2) it is what reaches the exact optimum (from 8 seeds of 8; 2.8 %
// short without it), at 0.8-1.8 s a decision against 0.2 s.
constexpr std::size_t kPairPolishMaxModels = 16;
// Multi-start polish (below), for N > kMultiStartAbove: on bench_plan's scale-n12 it finds the
// exact optimum from 9 of 12 GA seeds (3 of 6 from the best individual alone) for about 1.5x
// the time; at N <= 8 the bounded branch and bound below settles it instead.
constexpr std::size_t kPolishStarts = 3;
constexpr std::size_t kMultiStartAbove = 8;
// Nodes of the bounded branch and bound after the polish, for N <= kBoundedSearchMaxModels: on
// bench_plan's scale-n8 it proves the optimum from every GA seed tried (1,974 to 2,882 nodes;
// the GA alone missed it by up to 0.6 % from 9 seeds of 12); at N = 12 a proof takes 55k nodes,
// and 3,000 of them cost up to 0.5 s without finding a better plan.
constexpr std::uint64_t kBoundNodes = 3000;
constexpr std::size_t kBoundedSearchMaxModels = 8;

class GaSolver final : public Solver {
 public:
  explicit GaSolver(bool bounded_polish) : bounded_polish_(bounded_polish) {}
  [[nodiscard]] std::string_view name() const override { return "ga"; }

  Result<PlanResult> solve(const PlanProblem& p, const SolverOptions& o) const override {
    const auto start = std::chrono::steady_clock::now();
    const auto& act = p.active_models();
    if (act.empty()) return Error("no active models to plan");
    const std::size_t n = p.models();
    const std::size_t pop_size =
        std::clamp(kPopulationPerGene * act.size(), kMinPopulation, kMaxPopulation);
    Rng rng(derive_seed(o.seed, {0x6761}));
    detail::Evaluator eval(p, 256, o.threads);

    // Lighter = lower quality: for every model, its local configurations by quality.
    std::vector<std::vector<std::int32_t>> by_quality(n);
    std::vector<std::vector<std::size_t>> rank(n);
    for (auto m : act) {
      auto& v = by_quality[m];
      v.resize(p.local_count(m));
      std::iota(v.begin(), v.end(), 0);
      std::stable_sort(v.begin(), v.end(),
                       [&](auto a, auto b) { return p.quality(m, a) < p.quality(m, b); });
      rank[m].resize(v.size());
      for (std::size_t i = 0; i < v.size(); ++i) rank[m][static_cast<std::size_t>(v[i])] = i;
    }
    auto random_gene = [&](std::size_t m) {
      return static_cast<std::int32_t>(rng.below(p.local_count(m)));
    };
    auto mutate = [&](JointConfig& c) {
      bool changed = false;
      for (auto m : act) {
        if (rng.uniform() < 1.0 / static_cast<double>(act.size())) {
          c[m] = random_gene(m);
          changed = true;
        }
      }
      if (!changed) {
        const std::size_t m = act[rng.below(act.size())];
        c[m] = random_gene(m);
      }
    };

    std::vector<JointConfig> pop;
    if (o.warm_start) {
      const JointConfig w = detail::normalise(p, *o.warm_start);
      pop.push_back(w);
      for (std::size_t i = 0; i < kWarmMutants; ++i) {
        JointConfig c = w;
        mutate(c);
        pop.push_back(std::move(c));
      }
    }
    while (pop.size() < pop_size) {
      JointConfig c(n, kAbsent);
      for (auto m : act) c[m] = random_gene(m);
      pop.push_back(std::move(c));
    }
    std::vector<double> fit(pop.size());
    auto evaluate_all = [&](const std::vector<JointConfig>& population, std::vector<double>& f) {
      std::vector<std::int32_t> flat;
      flat.reserve(population.size() * n);
      for (const auto& c : population) flat.insert(flat.end(), c.begin(), c.end());
      f.resize(population.size());
      eval.fitness(flat, population.size(), f);
    };
    evaluate_all(pop, fit);

    auto best_of = [&] {
      return static_cast<std::size_t>(std::max_element(fit.begin(), fit.end()) - fit.begin());
    };
    double best_fit = fit[best_of()];
    int stall = 0;
    for (int gen = 0; gen < kMaxGenerations && stall < kStallGenerations; ++gen) {
      std::vector<std::size_t> order(pop.size());
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(), [&](auto a, auto b) { return fit[a] > fit[b]; });
      std::vector<JointConfig> next;
      for (std::size_t e = 0; e < kElite && e < order.size(); ++e) next.push_back(pop[order[e]]);
      auto tournament = [&]() -> const JointConfig& {
        std::size_t best = rng.below(pop.size());
        for (std::size_t k = 1; k < kTournament; ++k) {
          const std::size_t c = rng.below(pop.size());
          if (fit[c] > fit[best]) best = c;
        }
        return pop[best];
      };
      while (next.size() < pop_size) {
        JointConfig child = tournament();
        if (rng.uniform() < kCrossoverRate) {
          const JointConfig& other = tournament();
          for (auto m : act) {
            if (rng.uniform() < 0.5) child[m] = other[m];
          }
        }
        mutate(child);
        next.push_back(std::move(child));
      }
      // The whole generation is evaluated as one batch, then infeasible children are repaired
      // in rounds, each round one batch of candidate fixes.
      std::vector<double> next_fit;
      evaluate_all(next, next_fit);
      for (int t = 0; t < kRepairTries; ++t) {
        std::vector<std::size_t> who;
        std::vector<JointConfig> fixes;
        for (std::size_t i = kElite; i < next.size(); ++i) {
          if (is_feasible_fitness(next_fit[i])) continue;
          const std::size_t m = act[rng.below(act.size())];
          const std::size_t r = rank[m][static_cast<std::size_t>(next[i][m])];
          if (r == 0) continue;
          JointConfig fixed = next[i];
          fixed[m] = by_quality[m][rng.below(r)];
          who.push_back(i);
          fixes.push_back(std::move(fixed));
        }
        if (fixes.empty()) break;
        std::vector<double> fix_fit;
        evaluate_all(fixes, fix_fit);
        for (std::size_t k = 0; k < fixes.size(); ++k) {
          if (fix_fit[k] > next_fit[who[k]]) {
            next[who[k]] = std::move(fixes[k]);
            next_fit[who[k]] = fix_fit[k];
          }
        }
      }
      pop = std::move(next);
      fit = std::move(next_fit);
      const double b = fit[best_of()];
      if (b > best_fit + 1e-12) {
        best_fit = b;
        stall = 0;
      } else {
        ++stall;
      }
    }

    // Polish: steepest ascent over one-gene moves, then over two-gene moves, each step
    // evaluated as one batch, until neither improves. On a monotone mean-field predictor a
    // move whose utility bound (each model's, against the least load of the others:
    // detail::utility_bounds) stays under the feasible plan it starts from cannot be the step
    // taken, and is not evaluated: the same polish for a fraction of the predictions (on
    // bench_plan's scale-n12 most two-gene moves fall there).
    const auto* agg = dynamic_cast<const AggregatePredictor*>(&p.predictor());
    const auto bound = agg != nullptr && agg->monotone()
                           ? detail::utility_bounds(p)
                           : std::optional<std::vector<std::vector<double>>>{};
    JointConfig best;
    auto climb = [&](bool pairs) {
      std::vector<std::int32_t> flat;
      std::vector<JointConfig> moves;
      // The bound of `best`'s utility, and how a move of models a (and b) changes it.
      double base = 0;
      const bool prune = bound.has_value() && is_feasible_fitness(best_fit);
      // Below this a move cannot beat best_fit (a relative 1e-9 absorbs the rounding of
      // adding bounds up in another order).
      const double floor = best_fit - 1e-9 * std::abs(best_fit);
      if (prune) {
        for (auto m : act) base += (*bound)[m][static_cast<std::size_t>(best[m])];
      }
      auto gain = [&](std::size_t m, std::int32_t l) {
        return (*bound)[m][static_cast<std::size_t>(l)] -
               (*bound)[m][static_cast<std::size_t>(best[m])];
      };
      // Whether a move whose bounds add up to `moved` could beat best_fit.
      auto may_win = [&](double moved) { return !prune || moved >= floor; };
      auto add = [&](const JointConfig& c) {
        flat.insert(flat.end(), c.begin(), c.end());
        moves.push_back(c);
      };
      for (std::size_t a = 0; a < act.size(); ++a) {
        const std::size_t ma = act[a];
        for (std::int32_t la = 0; la < static_cast<std::int32_t>(p.local_count(ma)); ++la) {
          if (la == best[ma]) continue;
          JointConfig c = best;
          c[ma] = la;
          const double with_a = prune ? base + gain(ma, la) : 0;
          if (!pairs) {
            if (may_win(with_a)) add(c);
            continue;
          }
          for (std::size_t b = a + 1; b < act.size(); ++b) {
            const std::size_t mb = act[b];
            for (std::int32_t lb = 0; lb < static_cast<std::int32_t>(p.local_count(mb)); ++lb) {
              if (lb == best[mb] || !may_win(prune ? with_a + gain(mb, lb) : 0)) continue;
              JointConfig d = c;
              d[mb] = lb;
              add(d);
            }
          }
        }
      }
      std::vector<double> f(moves.size());
      eval.fitness(flat, moves.size(), f);
      const auto it = std::max_element(f.begin(), f.end());
      if (it == f.end() || *it <= best_fit + 1e-12) return false;
      best = moves[static_cast<std::size_t>(it - f.begin())];
      best_fit = *it;
      return true;
    };
    // From N > kMultiStartAbove the polish starts from each of the kPolishStarts best distinct
    // feasible individuals and keeps the best local optimum: a GA that converged into one basin
    // often holds the way out of it in its runners-up.
    const std::size_t starts_wanted = act.size() > kMultiStartAbove ? kPolishStarts : 1;
    std::vector<std::size_t> order(pop.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](auto a, auto b) { return fit[a] > fit[b]; });
    std::vector<std::size_t> starts = {order.front()};
    for (std::size_t i : order) {
      if (starts.size() >= starts_wanted || !is_feasible_fitness(fit[i])) break;
      const bool seen = std::any_of(starts.begin(), starts.end(),
                                    [&](std::size_t k) { return pop[k] == pop[i]; });
      if (!seen) starts.push_back(i);
    }
    JointConfig winner;
    double winner_fit = -std::numeric_limits<double>::infinity();
    for (const std::size_t i : starts) {
      best = pop[i];
      best_fit = fit[i];
      while (climb(false) || (kPairPolishMaxModels >= act.size() && climb(true))) {
      }
      if (best_fit > winner_fit + 1e-12) {
        winner = best;
        winner_fit = best_fit;
      }
    }
    best = std::move(winner);
    best_fit = winner_fit;

    // Bounded branch and bound from the polished plan: the exact solver's search, cut after
    // kBoundNodes nodes. Where it finishes the plan is optimal under a monotone predictor;
    // where it does not, it keeps any better plan it met.
    std::uint64_t evaluated = eval.evaluated();
    bool proved = false;
    std::uint64_t nodes = 0;
    if (bounded_polish_ && is_feasible_fitness(best_fit) && act.size() <= kBoundedSearchMaxModels) {
      if (auto b = detail::bounded_search(p, best, best_fit, kBoundNodes)) {
        if (b->improved) best = std::move(b->best);
        evaluated += b->evaluated;
        nodes = b->nodes;
        proved = b->finished && dynamic_cast<const AggregatePredictor&>(p.predictor()).monotone();
      }
    }
    PlanResult r = evaluate_plan(p, best, "ga");
    r.stats.evaluated = evaluated;
    r.stats.nodes = nodes;
    r.stats.proved_optimal = proved;
    r.stats.elapsed_ms = detail::ms_since(start);
    return r;
  }

 private:
  bool bounded_polish_;
};

}  // namespace

namespace detail {
std::unique_ptr<Solver> make_ga_solver(bool bounded_polish) {
  return std::make_unique<GaSolver>(bounded_polish);
}
}  // namespace detail

std::unique_ptr<Solver> make_ga_solver() { return std::make_unique<GaSolver>(true); }

}  // namespace corun

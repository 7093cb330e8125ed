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

/// Per active model and local configuration, an upper bound of its utility (or none).
using UtilityBounds = std::optional<std::vector<std::vector<double>>>;

/// @brief One run of the GA on one problem: its population, its memoised evaluator and its
/// random stream, from the first generation to the polished plan.
class GaRun {
 public:
  GaRun(const Context& ctx, const PlanProblem& p)
      : p_(p),
        act_(p.active_models()),
        n_(p.models()),
        pop_size_(std::clamp(kPopulationPerGene * act_.size(), kMinPopulation, kMaxPopulation)),
        rng_(derive_seed(ctx.seed, {0x6761})),
        eval_(p, 256, ctx.threads),
        by_quality_(n_),
        rank_(n_) {
    rank_by_quality();
  }

  /// @brief Seeds the population (the warm start and its mutants first, then random
  /// individuals) and evaluates it.
  void seed_population(const std::optional<JointConfig>& warm_start) {
    if (warm_start) {
      const JointConfig w = detail::normalise(p_, *warm_start);
      pop_.push_back(w);
      for (std::size_t i = 0; i < kWarmMutants; ++i) {
        JointConfig c = w;
        mutate(c);
        pop_.push_back(std::move(c));
      }
    }
    while (pop_.size() < pop_size_) {
      JointConfig c(n_, kAbsent);
      for (auto m : act_) c[m] = random_gene(m);
      pop_.push_back(std::move(c));
    }
    fit_.resize(pop_.size());
    evaluate_all(pop_, fit_);
  }

  /// @brief Runs the generations until the limit, or until the best fitness stalls.
  void evolve() {
    best_fit_ = fit_[best_of()];
    int stall = 0;
    for (int gen = 0; gen < kMaxGenerations && stall < kStallGenerations; ++gen) {
      std::vector<JointConfig> next = breed();
      // The whole generation is evaluated as one batch, then infeasible children are repaired
      // in rounds, each round one batch of candidate fixes.
      std::vector<double> next_fit;
      evaluate_all(next, next_fit);
      for (int t = 0; t < kRepairTries; ++t) {
        if (!repair_round(next, next_fit)) break;
      }
      pop_ = std::move(next);
      fit_ = std::move(next_fit);
      const double b = fit_[best_of()];
      if (b > best_fit_ + 1e-12) {
        best_fit_ = b;
        stall = 0;
      } else {
        ++stall;
      }
    }
  }

  /// @brief Polishes the best individuals by steepest ascent and keeps the best local optimum.
  void polish() {
    // Polish: steepest ascent over one-gene moves, then over two-gene moves, each step
    // evaluated as one batch, until neither improves. On a monotone mean-field predictor a
    // move whose utility bound (each model's, against the least load of the others:
    // detail::utility_bounds) stays under the feasible plan it starts from cannot be the step
    // taken, and is not evaluated: the same polish for a fraction of the predictions (on
    // bench_plan's scale-n12 most two-gene moves fall there).
    const auto* agg = dynamic_cast<const AggregatePredictor*>(&p_.predictor());
    const auto bound =
        agg != nullptr && agg->monotone() ? detail::utility_bounds(p_) : UtilityBounds{};
    JointConfig winner;
    double winner_fit = -std::numeric_limits<double>::infinity();
    for (const std::size_t i : polish_starts()) {
      best_ = pop_[i];
      best_fit_ = fit_[i];
      while (climb(bound, false) || (kPairPolishMaxModels >= act_.size() && climb(bound, true))) {
      }
      if (best_fit_ > winner_fit + 1e-12) {
        winner = best_;
        winner_fit = best_fit_;
      }
    }
    best_ = std::move(winner);
    best_fit_ = winner_fit;
  }

  /// @brief Runs the bounded branch and bound from the polished plan where `bounded_polish`
  /// asks for it, and reports the plan with the search's statistics.
  PlanResult report(bool bounded_polish, std::chrono::steady_clock::time_point start) {
    // Bounded branch and bound from the polished plan: the exact solver's search, cut after
    // kBoundNodes nodes. Where it finishes the plan is optimal under a monotone predictor;
    // where it does not, it keeps any better plan it met.
    std::uint64_t evaluated = eval_.evaluated();
    bool proved = false;
    std::uint64_t nodes = 0;
    if (bounded_polish && is_feasible_fitness(best_fit_) &&
        act_.size() <= kBoundedSearchMaxModels) {
      if (auto b = detail::bounded_search(p_, best_, best_fit_, kBoundNodes)) {
        if (b->improved) best_ = std::move(b->best);
        evaluated += b->evaluated;
        nodes = b->nodes;
        proved = b->finished && dynamic_cast<const AggregatePredictor&>(p_.predictor()).monotone();
      }
    }
    PlanResult r = evaluate_plan(p_, best_, "ga");
    r.stats.evaluated = evaluated;
    r.stats.nodes = nodes;
    r.stats.proved_optimal = proved;
    r.stats.elapsed_ms = detail::ms_since(start);
    return r;
  }

 private:
  /// @brief Lighter = lower quality: for every model, its local configurations by quality,
  /// and each configuration's rank in that order.
  void rank_by_quality() {
    for (auto m : act_) {
      auto& v = by_quality_[m];
      v.resize(p_.local_count(m));
      std::iota(v.begin(), v.end(), 0);
      std::stable_sort(v.begin(), v.end(),
                       [&](auto a, auto b) { return p_.quality(m, a) < p_.quality(m, b); });
      rank_[m].resize(v.size());
      for (std::size_t i = 0; i < v.size(); ++i) rank_[m][static_cast<std::size_t>(v[i])] = i;
    }
  }

  /// @brief A uniformly drawn local configuration of model m.
  std::int32_t random_gene(std::size_t m) {
    return static_cast<std::int32_t>(rng_.below(p_.local_count(m)));
  }

  /// @brief Re-draws each gene with probability 1/N, and one random gene when none was.
  void mutate(JointConfig& c) {
    bool changed = false;
    for (auto m : act_) {
      if (rng_.uniform() < 1.0 / static_cast<double>(act_.size())) {
        c[m] = random_gene(m);
        changed = true;
      }
    }
    if (!changed) {
      const std::size_t m = act_[rng_.below(act_.size())];
      c[m] = random_gene(m);
    }
  }

  /// @brief Fitness of every individual of `population`, as one batch.
  void evaluate_all(const std::vector<JointConfig>& population, std::vector<double>& f) {
    std::vector<std::int32_t> flat;
    flat.reserve(population.size() * n_);
    for (const auto& c : population) flat.insert(flat.end(), c.begin(), c.end());
    f.resize(population.size());
    eval_.fitness(flat, population.size(), f);
  }

  /// @brief The index of the fittest individual (the first of equals).
  [[nodiscard]] std::size_t best_of() const {
    return static_cast<std::size_t>(std::max_element(fit_.begin(), fit_.end()) - fit_.begin());
  }

  /// @brief The population's indices, fittest first (stable among equals).
  [[nodiscard]] std::vector<std::size_t> by_fitness() const {
    std::vector<std::size_t> order(pop_.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](auto a, auto b) { return fit_[a] > fit_[b]; });
    return order;
  }

  /// @brief The fittest of kTournament individuals drawn at random.
  const JointConfig& tournament() {
    std::size_t best = rng_.below(pop_.size());
    for (std::size_t k = 1; k < kTournament; ++k) {
      const std::size_t c = rng_.below(pop_.size());
      if (fit_[c] > fit_[best]) best = c;
    }
    return pop_[best];
  }

  /// @brief The next generation: the elite unchanged, then children of tournament winners by
  /// crossover and mutation.
  std::vector<JointConfig> breed() {
    const std::vector<std::size_t> order = by_fitness();
    std::vector<JointConfig> next;
    for (std::size_t e = 0; e < kElite && e < order.size(); ++e) next.push_back(pop_[order[e]]);
    while (next.size() < pop_size_) {
      JointConfig child = tournament();
      if (rng_.uniform() < kCrossoverRate) {
        const JointConfig& other = tournament();
        for (auto m : act_) {
          if (rng_.uniform() < 0.5) child[m] = other[m];
        }
      }
      mutate(child);
      next.push_back(std::move(child));
    }
    return next;
  }

  /// @brief One repair round: each infeasible child tries one random gene moved to a lighter
  /// configuration, kept where fitness improves; false when no child had a fix to try.
  bool repair_round(std::vector<JointConfig>& next, std::vector<double>& next_fit) {
    std::vector<std::size_t> who;
    std::vector<JointConfig> fixes;
    for (std::size_t i = kElite; i < next.size(); ++i) {
      if (is_feasible_fitness(next_fit[i])) continue;
      const std::size_t m = act_[rng_.below(act_.size())];
      const std::size_t r = rank_[m][static_cast<std::size_t>(next[i][m])];
      if (r == 0) continue;
      JointConfig fixed = next[i];
      fixed[m] = by_quality_[m][rng_.below(r)];
      who.push_back(i);
      fixes.push_back(std::move(fixed));
    }
    if (fixes.empty()) return false;
    std::vector<double> fix_fit;
    evaluate_all(fixes, fix_fit);
    for (std::size_t k = 0; k < fixes.size(); ++k) {
      if (fix_fit[k] > next_fit[who[k]]) {
        next[who[k]] = std::move(fixes[k]);
        next_fit[who[k]] = fix_fit[k];
      }
    }
    return true;
  }

  /// @brief Where the polish starts: the fittest individual, and for N > kMultiStartAbove up
  /// to kPolishStarts best distinct feasible ones.
  [[nodiscard]] std::vector<std::size_t> polish_starts() const {
    // From N > kMultiStartAbove the polish starts from each of the kPolishStarts best distinct
    // feasible individuals and keeps the best local optimum: a GA that converged into one basin
    // often holds the way out of it in its runners-up.
    const std::size_t starts_wanted = act_.size() > kMultiStartAbove ? kPolishStarts : 1;
    const std::vector<std::size_t> order = by_fitness();
    std::vector<std::size_t> starts = {order.front()};
    for (std::size_t i : order) {
      if (starts.size() >= starts_wanted || !is_feasible_fitness(fit_[i])) break;
      const bool seen = std::any_of(starts.begin(), starts.end(),
                                    [&](std::size_t k) { return pop_[k] == pop_[i]; });
      if (!seen) starts.push_back(i);
    }
    return starts;
  }

  /// @brief One steepest-ascent step from best_ over one-gene moves (`pairs`: two-gene
  /// moves), evaluated as one batch; false when no move improves.
  bool climb(const UtilityBounds& bound, bool pairs) {
    std::vector<std::int32_t> flat;
    std::vector<JointConfig> moves;
    // The bound of `best`'s utility, and how a move of models a (and b) changes it.
    double base = 0;
    const bool prune = bound.has_value() && is_feasible_fitness(best_fit_);
    // Below this a move cannot beat best_fit (a relative 1e-9 absorbs the rounding of
    // adding bounds up in another order).
    const double floor = best_fit_ - 1e-9 * std::abs(best_fit_);
    if (prune) {
      for (auto m : act_) base += (*bound)[m][static_cast<std::size_t>(best_[m])];
    }
    auto gain = [&](std::size_t m, std::int32_t l) {
      return (*bound)[m][static_cast<std::size_t>(l)] -
             (*bound)[m][static_cast<std::size_t>(best_[m])];
    };
    // Whether a move whose bounds add up to `moved` could beat best_fit.
    auto may_win = [&](double moved) { return !prune || moved >= floor; };
    auto add = [&](const JointConfig& c) {
      flat.insert(flat.end(), c.begin(), c.end());
      moves.push_back(c);
    };
    for (std::size_t a = 0; a < act_.size(); ++a) {
      const std::size_t ma = act_[a];
      for (std::int32_t la = 0; la < static_cast<std::int32_t>(p_.local_count(ma)); ++la) {
        if (la == best_[ma]) continue;
        JointConfig c = best_;
        c[ma] = la;
        const double with_a = prune ? base + gain(ma, la) : 0;
        if (!pairs) {
          if (may_win(with_a)) add(c);
          continue;
        }
        for (std::size_t b = a + 1; b < act_.size(); ++b) {
          const std::size_t mb = act_[b];
          for (std::int32_t lb = 0; lb < static_cast<std::int32_t>(p_.local_count(mb)); ++lb) {
            if (lb == best_[mb] || !may_win(prune ? with_a + gain(mb, lb) : 0)) continue;
            JointConfig d = c;
            d[mb] = lb;
            add(d);
          }
        }
      }
    }
    std::vector<double> f(moves.size());
    eval_.fitness(flat, moves.size(), f);
    const auto it = std::max_element(f.begin(), f.end());
    if (it == f.end() || *it <= best_fit_ + 1e-12) return false;
    best_ = moves[static_cast<std::size_t>(it - f.begin())];
    best_fit_ = *it;
    return true;
  }

  const PlanProblem& p_;
  const std::vector<std::size_t>& act_;
  const std::size_t n_;
  const std::size_t pop_size_;
  Rng rng_;
  detail::Evaluator eval_;
  std::vector<std::vector<std::int32_t>> by_quality_;
  std::vector<std::vector<std::size_t>> rank_;
  std::vector<JointConfig> pop_;
  std::vector<double> fit_;
  JointConfig best_;  ///< the plan the polish climbs from
  double best_fit_ = 0;
};

class GaSolver final : public Solver {
 public:
  explicit GaSolver(bool bounded_polish) : bounded_polish_(bounded_polish) {}
  [[nodiscard]] std::string_view name() const override { return "ga"; }

  Result<PlanResult> solve(const Context& ctx, const PlanProblem& p,
                           const SolverOptions& o) const override {
    const auto start = std::chrono::steady_clock::now();
    if (p.active_models().empty()) return Error("no active models to plan");
    GaRun ga(ctx, p);
    ga.seed_population(o.warm_start);
    ga.evolve();
    ga.polish();
    return ga.report(bounded_polish_, start);
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

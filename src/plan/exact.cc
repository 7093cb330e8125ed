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
// This file holds the solver and detail::bounded_search(); the search itself is
// detail::ExactSearch (exact_internal.h).
#include <algorithm>
#include <chrono>
#include <optional>

#include "exact_internal.h"

namespace corun {
namespace {

class ExactSolver final : public Solver {
 public:
  [[nodiscard]] std::string_view name() const override { return "exact"; }

  Result<PlanResult> solve(const Context& ctx, const PlanProblem& p,
                           const SolverOptions& o) const override {
    const auto start = std::chrono::steady_clock::now();
    const auto* agg = dynamic_cast<const AggregatePredictor*>(&p.predictor());
    if (agg == nullptr) {
      return Error(
          "the exact solver needs a mean-field (aggregate) predictor; this surrogate "
          "is not one (use exhaustive or ga)");
    }
    if (p.active_models().empty()) return Error("no active models to plan");
    detail::ExactSearch s(p, *agg);

    const auto ga = detail::make_ga_solver(false);
    auto seed_plan = ga->solve(ctx, p, o);
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
    if (plannable) s.run_split(ctx.threads);
    PlanResult r = s.best.empty() ? *seed_plan : evaluate_plan(p, s.best, "exact");
    r.solver = "exact";
    r.stats.evaluated = seed_plan->stats.evaluated + s.evaluated;
    r.stats.nodes = s.nodes;
    r.stats.proved_optimal = s.nodes < s.budget && agg->monotone();
    r.stats.elapsed_ms = detail::ms_since(start);
    return r;
  }
};

}  // namespace

namespace detail {

std::optional<BoundedSearch> bounded_search(const PlanProblem& p, const JointConfig& incumbent,
                                            double utility, std::uint64_t node_budget, int workers,
                                            bool recall) {
  const auto* agg = dynamic_cast<const AggregatePredictor*>(&p.predictor());
  if (agg == nullptr || p.active_models().empty()) return std::nullopt;
  ExactSearch s(p, *agg);
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

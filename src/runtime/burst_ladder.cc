// One GPU's plan that leaves a declared tool burst room: decisions down the ladder of the
// tools' SM shares.

#include "corun/runtime/burst_ladder.h"

#include <utility>

#include "corun/surrogate/cotenant.h"

namespace corun {

bool leaves_room(const Workload& w, const BurstAttempt& a, const BurstAttempt& steady) {
  if (a.feasible()) return true;
  if (!a.degraded.result.feasible) return false;
  const PlanResult& r = a.degraded.result;
  for (std::size_t m = 0; m < w.models.size(); ++m) {
    const bool given_up = m < a.degraded.best_effort.size() && a.degraded.best_effort[m];
    if (!given_up || r.config[m] == kAbsent) continue;
    const bool steady_gave_up =
        m < steady.degraded.best_effort.size() && steady.degraded.best_effort[m];
    if (!steady_gave_up || !meets_sla(w.models[m], r.predicted[m], Margin{})) return false;
  }
  return true;
}

Result<std::unique_ptr<BurstAttempt>> solve_burst_attempt(const BurstLadderInputs& in,
                                                          std::size_t i, bool planned) {
  const Workload& w = in.w;
  auto a = std::make_unique<BurstAttempt>();
  SurrogateSourceOptions so{3, in.window_s};
  if (!in.loads.empty()) {
    a->burst = i;
    if (planned) so.burst = surrogate::cotenant_totals(w.device, in.loads[i]);
  }
  a->source = std::make_unique<SurrogateSource>(in.ctx, in.surrogate, in.testbed, so);
  auto predictor = a->source->predictor_for(w);
  if (!predictor) return predictor.error();
  a->predictor = std::move(*predictor);
  a->margins = a->source->margins(w);
  a->problem = std::make_unique<PlanProblem>(w, in.active, *a->predictor, a->margins);
  auto degraded = solve_degrading(in.ctx, *a->problem, in.solver, SolverOptions{});
  if (!degraded) return degraded.error();
  a->degraded = std::move(*degraded);
  return a;
}

Result<BurstLadder> climb_burst_ladder(const BurstLadderInputs& in,
                                       const std::vector<double>& shares, bool plan_burst) {
  BurstLadder out;
  for (std::size_t i = 0; i < shares.size(); ++i) {
    auto a = solve_burst_attempt(in, i, plan_burst);
    if (!a) return a.error();
    out.tried.push_back(shares[i]);
    out.chosen = std::move(*a);
    if (!plan_burst) break;
    if (!out.chosen->feasible() && !out.steady) {
      auto s0 = solve_burst_attempt(in, 0, false);
      if (!s0) return s0.error();
      out.steady = std::move(*s0);
    }
    out.room = out.chosen->feasible() || leaves_room(in.w, *out.chosen, *out.steady);
    if (out.room) break;
  }
  return out;
}

}  // namespace corun

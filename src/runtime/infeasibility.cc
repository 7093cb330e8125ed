#include "corun/runtime/infeasibility.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "corun/core/strings.h"
#include "corun/plan/objective.h"
#include "corun/runtime/renumbered_predictor.h"
#include "corun/space/space.h"

namespace corun {

namespace {

// A configuration serves its demand when it serves this fraction of it: throughput predictions
// carry a few percent of error.
constexpr double kServes = 0.98;

bool has_sla(const ModelSpec& m) {
  return m.sla.latency_ms_p95 || m.sla.ttft_ms_p95 || m.sla.tpot_ms_p95 || m.sla.min_throughput;
}

// Predictions of model m in each of its local configurations, with the others as in `context`
// (kAbsent everywhere: alone on the GPU).
std::vector<Predicted> sweep(const PlanProblem& p, std::size_t m, JointConfig context) {
  const std::size_t n = p.models();
  const std::size_t count = p.local_count(m);
  std::vector<std::int32_t> rows(count * n);
  for (std::size_t l = 0; l < count; ++l) {
    context[m] = static_cast<std::int32_t>(l);
    std::copy(context.begin(), context.end(), rows.begin() + static_cast<std::ptrdiff_t>(l * n));
  }
  std::vector<Predicted> all(count * n);
  p.predictor().predict(rows, count, all);
  std::vector<Predicted> out(count);
  for (std::size_t l = 0; l < count; ++l) out[l] = all[l * n + m];
  return out;
}

// The configuration of model m that comes closest to its SLA as predicted in `preds`. With
// `permitted`, a configuration the problem does not allow (a pin, a minimum dwell) counts as
// one full excess, as the solvers count it: a model whose allowed configuration holds is not
// given up because a configuration it may not move to holds as well.
std::int32_t closest(const PlanProblem& p, std::size_t m, const std::vector<Predicted>& preds,
                     bool permitted = false) {
  std::int32_t best = 0;
  double least = std::numeric_limits<double>::infinity();
  for (std::size_t l = 0; l < preds.size(); ++l) {
    const auto li = static_cast<std::int32_t>(l);
    const double e = permitted ? p.excess(m, li, preds[l])
                               : sla_excess(p.workload().models[m], preds[l], p.margin(m, li));
    if (e < least) {
      least = e;
      best = li;
    }
  }
  return best;
}

// The limit model `spec`'s SLA sets on key `k` (one of sla_keys(spec)).
double limit_of(const ModelSpec& spec, const SlaKey& k) { return *(spec.sla.*k.limit); }

// The demand a configuration serves, in the unit the demand is written in.
struct Served {
  double offered = 0;
  double served = 0;
  const char* unit = "requests/s";
};

Served served(const ModelSpec& m, const Settings& s, const Predicted& q) {
  Served out;
  switch (m.arch.family) {
    case ModelFamily::kLlm:
      out.offered = m.demand.rps;
      out.served = m.demand.output_tokens > 0
                       ? q.throughput / static_cast<double>(m.demand.output_tokens)
                       : 0;
      break;
    case ModelFamily::kVision:
      out.offered = m.demand.fps * (1 - s.skip_rate);
      out.served = q.throughput;
      out.unit = "frames/s";
      break;
    default:
      out.offered = m.demand.rps;
      out.served = q.throughput;
      break;
  }
  return out;
}

// What limits a model that cannot meet its SLA alone.
std::string alone_cause(const PlanProblem& p, std::size_t m, const std::vector<Predicted>& preds) {
  const ModelSpec& spec = p.workload().models[m];
  std::size_t fastest = 0;
  double ratio = -1;
  for (std::size_t l = 0; l < preds.size(); ++l) {
    const Served s = served(spec, spec.settings(l), preds[l]);
    const double r = s.offered > 0 ? s.served / s.offered : 1;
    if (r > ratio) {
      ratio = r;
      fastest = l;
    }
  }
  const Settings best = spec.settings(fastest);
  const Served s = served(spec, best, preds[fastest]);
  if (s.offered > 0 && s.served < kServes * s.offered) {
    std::string who = "its fastest configuration (" + spec.describe(fastest) + ")";
    for (const auto& k : spec.knobs) {
      if (k.id != KnobId::kRequestConcurrency) continue;
      const double top = *std::max_element(k.values.begin(), k.values.end());
      if (best.request_concurrency == static_cast<int>(top)) {
        who = "the largest request_concurrency (" + format_number(top) + ")";
      }
    }
    return "demand " + format_number(s.offered) + " " + s.unit + " exceeds the ≈ " +
           format_quantity(s.served) + " " + s.unit + " " + who + " serves";
  }
  return "even alone on the GPU no configuration is within the limit at the planned margin";
}

Infeasibility explain(const PlanProblem& p, std::size_t m, const std::vector<Predicted>& preds,
                      bool alone) {
  const ModelSpec& spec = p.workload().models[m];
  Infeasibility why;
  why.model = m;
  why.name = spec.name;
  why.alone = alone;
  const std::int32_t c = closest(p, m, preds);
  // The key violated most at the closest configuration.
  double worst = -1;

  // How far configuration l is from the key's limit at its planned margin (> 0: beyond it).
  auto excess = [&](const SlaKey& k, std::size_t l) {
    const double v = preds[l].*k.predicted;
    const double mk = p.margin(m, static_cast<std::int32_t>(l)).*k.margin;
    const double limit = limit_of(spec, k);
    return k.floor ? 1 - v / ((1 + mk) * limit) : v * (1 + mk) / limit - 1;
  };
  for (const SlaKey& k : sla_keys(spec)) {
    const double e = excess(k, static_cast<std::size_t>(c));
    if (e > worst) {
      worst = e;
      why.sla_key = std::string(k.name);
      why.limit = limit_of(spec, k);
      // The configuration that comes closest to this key's limit at its planned margin.
      std::size_t at = 0;
      for (std::size_t l = 1; l < preds.size(); ++l) {
        if (excess(k, l) < excess(k, at)) at = l;
      }
      why.best = preds[at].*k.predicted;
      why.best_margin = p.margin(m, static_cast<std::int32_t>(at)).*k.margin;
      why.best_config = spec.describe(at);
    }
  }
  why.cause = alone ? alone_cause(p, m, preds)
                    : "not within its margin next to the other models; of those that cannot all "
                      "be held it has the lowest weight (" +
                          format_number(spec.weight) + ")";
  return why;
}

// The degraded problem: `w` with the given-up SLAs cleared and each pinned model viewed with the
// one configuration it is pinned to (local count 1), so that every solver keeps it there.
struct PinnedView {
  Workload w;
  std::unique_ptr<Predictor> predictor;
  MarginTable margins;
  std::vector<std::int32_t> pins;
  std::vector<std::vector<double>> cost;  // the problem's transition costs, renumbered
  std::vector<std::vector<bool>> allowed;
  std::vector<std::vector<double>> scale;

  PinnedView(const PlanProblem& problem, Workload relaxed, std::vector<std::int32_t> pinned)
      : w(std::move(relaxed)), pins(std::move(pinned)) {
    const std::size_t n = w.models.size();
    std::vector<std::vector<std::int32_t>> map(n);
    margins = problem.margins();
    cost = problem.transition_costs();
    allowed = problem.allowed_configs();
    scale = problem.throughput_scales();
    for (std::size_t m = 0; m < n; ++m) {
      const std::size_t count = problem.local_count(m);
      if (pins[m] == kAbsent) {
        for (std::size_t l = 0; l < count; ++l) map[m].push_back(static_cast<std::int32_t>(l));
        continue;
      }
      const auto pin = static_cast<std::size_t>(pins[m]);
      if (!cost.empty()) cost[m] = {cost[m][pin]};
      if (!allowed.empty()) allowed[m] = {allowed[m][pin]};
      if (!scale.empty()) scale[m] = {scale[m][pin]};
      ModelSpec& spec = w.models[m];
      spec.base = spec.settings(static_cast<std::size_t>(pins[m]));
      spec.knobs.clear();
      map[m] = {pins[m]};
      margins[m] = {problem.margin(m, pins[m])};
    }
    predictor = make_renumbered(borrowed(problem.predictor()), std::move(map));
  }
  // A configuration of the view in the original numbering, and back.
  [[nodiscard]] JointConfig original(JointConfig c) const {
    for (std::size_t m = 0; m < c.size(); ++m) {
      if (pins[m] != kAbsent && c[m] != kAbsent) c[m] = pins[m];
    }
    return c;
  }
  [[nodiscard]] JointConfig viewed(JointConfig c) const {
    for (std::size_t m = 0; m < c.size(); ++m) {
      if (pins[m] != kAbsent && c[m] != kAbsent) c[m] = 0;
    }
    return c;
  }
};

}  // namespace

Infeasibility measured_ceiling(const ModelSpec& spec, std::size_t m, std::int32_t config,
                               const Predicted& predicted, const Margin& margin,
                               double measured_share) {
  Infeasibility why;
  why.model = m;
  why.name = spec.name;
  why.alone = false;
  why.best_config = spec.describe(static_cast<std::size_t>(config));
  why.measured_share = measured_share;
  double worst = -std::numeric_limits<double>::infinity();
  for (const SlaKey& k : sla_keys(spec)) {
    if (k.floor) continue;  // a sheddable model has no throughput floor
    const double mk = margin.*k.margin;
    const double e = predicted.*k.predicted * (1 + mk) / limit_of(spec, k);
    if (e > worst) {
      worst = e;
      why.sla_key = std::string(k.name);
      why.limit = limit_of(spec, k);
      why.best = predicted.*k.predicted;
      why.best_margin = mk;
    }
  }
  return why;
}

std::string Infeasibility::message() const {
  const std::string unit = sla_key == "min_throughput" ? "" : " ms";
  if (measured_share > 0) {
    return name + ": " + sla_key + " " + format_number(limit) + " was not held at " +
           format_number(std::round(100 * measured_share)) +
           " % of its demand as measured (beyond its limit at the planned margin); the " +
           format_quantity(best) + unit + " predicted at " + best_config +
           " for all of it is not trusted until its demand changes or the GPU becomes faster" +
           admission();
  }
  std::string planned;
  if (best_margin > 0.005) {
    const double bound =
        sla_key == "min_throughput" ? best / (1 + best_margin) : best * (1 + best_margin);
    planned = " (" + format_quantity(bound) + unit + " at its planned margin of " +
              format_number(std::round(100 * best_margin)) + " %)";
  }
  return name + ": " + sla_key + " " + format_number(limit) + " cannot be met" +
         (alone ? "" : " next to the others") + ": best " + format_quantity(best) + unit + planned +
         " at " + best_config + "; " + cause + admission();
}

std::string Infeasibility::admission() const {
  if (admitted >= 1) return "";
  if (admitted <= 0) return "; paused: no share of its demand holds it (its requests are refused)";
  return "; corun admits " + format_number(std::round(100 * admitted)) +
         " % of its demand and refuses the rest";
}

Result<DegradedPlan> solve_degrading(const Context& ctx, const PlanProblem& problem,
                                     const Solver& solver, const SolverOptions& options) {
  auto first = solver.solve(ctx, problem, options);
  if (!first) return first.error();
  const std::size_t n = problem.models();
  DegradedPlan out;
  out.result = *first;
  out.best_effort.assign(n, false);
  if (first->feasible || problem.active_models().empty()) return out;

  Workload relaxed = problem.workload();  // its given-up SLAs are cleared
  // The problem's own pins hold through every step (PlanProblem::pin).
  std::vector<std::int32_t> pins(n, kAbsent);
  std::vector<bool> active(n);
  for (std::size_t m = 0; m < n; ++m) {
    active[m] = problem.active(m);
    pins[m] = problem.pinned(m);
  }
  auto give_up = [&](std::size_t m, std::int32_t pin) {
    relaxed.models[m].sla = Sla{};
    if (problem.pinned(m) == kAbsent) pins[m] = pin;
    out.best_effort[m] = true;
  };
  // 1. Models that no configuration serves within their SLA even alone.
  for (std::size_t m : problem.active_models()) {
    if (!has_sla(problem.workload().models[m])) continue;
    const auto preds = sweep(problem, m, JointConfig(n, kAbsent));
    const std::int32_t c = closest(problem, m, preds, true);
    if (problem.excess(m, c, preds[static_cast<std::size_t>(c)]) == 0) continue;
    out.why.push_back(explain(problem, m, preds, true));
    // Pinned where it comes closest next to the co-runners of the first answer, not alone: a
    // configuration that is near its limit alone can saturate once others share the GPU.
    give_up(m, closest(problem, m, sweep(problem, m, first->config), true));
  }
  // 2. Until the rest can be held: the lightest-weighted model whose giving up lets every other
  // SLA hold, or else the lightest-weighted model the least-violating plan breaches.
  auto solve_view =
      [&](const Workload& w,
          const std::vector<std::int32_t>& pinned) -> Result<std::pair<PlanResult, JointConfig>> {
    const PinnedView view(problem, w, pinned);
    PlanProblem p(view.w, active, *view.predictor, view.margins);
    if (!view.cost.empty() || !view.allowed.empty() || !view.scale.empty()) {
      p.set_transitions(view.cost, view.allowed, view.scale);
    }
    SolverOptions o = options;
    if (o.warm_start && o.warm_start->size() == n) o.warm_start = view.viewed(*o.warm_start);
    auto r = solver.solve(ctx, p, o);
    if (!r) return r.error();
    JointConfig original = view.original(r->config);
    return std::make_pair(std::move(*r), std::move(original));
  };
  for (std::size_t round = 0; round <= n; ++round) {
    auto r = solve_view(relaxed, pins);
    if (!r) return r.error();
    out.result = r->first;
    out.result.config = r->second;
    if (r->first.feasible) break;
    // Candidates by increasing weight; among equal weights the larger breach first.
    std::vector<std::pair<double, std::size_t>> order;
    for (std::size_t m : problem.active_models()) {
      if (out.best_effort[m] || !has_sla(relaxed.models[m])) continue;
      const double e = problem.excess(m, out.result.config[m], out.result.predicted[m]);
      order.emplace_back(relaxed.models[m].weight - 1e-9 * e, m);
    }
    if (order.empty()) break;  // nothing left to give up (VRAM, or the pins alone do not fit)
    std::sort(order.begin(), order.end());
    std::size_t pick = problem.models();
    for (const auto& [key, m] : order) {
      Workload trial = relaxed;
      trial.models[m].sla = Sla{};
      auto t = solve_view(trial, pins);
      if (!t) return t.error();
      if (t->first.feasible) {
        pick = m;
        break;
      }
    }
    if (pick == problem.models()) {
      for (const auto& [key, m] : order) {
        if (problem.excess(m, out.result.config[m], out.result.predicted[m]) > 0) {
          pick = m;
          break;
        }
      }
    }
    if (pick == problem.models()) break;
    const auto preds = sweep(problem, pick, out.result.config);
    out.why.push_back(explain(problem, pick, preds, false));
    // Not pinned: without its SLA, the search may move it wherever the others hold.
    give_up(pick, kAbsent);
  }
  return out;
}

}  // namespace corun

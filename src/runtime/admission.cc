#include "corun/runtime/admission.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "corun/runtime/infeasibility.h"

namespace corun {

Status check(const AdmissionOptions& o) {
  auto bad = [](const char* field, const std::string& why) {
    return Error(std::string("admission.") + field + ": " + why, Error::Kind::kInvalidInput);
  };
  if (o.bisection_steps < 1 || o.bisection_steps > 12) {
    return bad("bisection_steps", "must be in [1, 12]");
  }
  if (!(o.stable_served > 0 && o.stable_served <= 1)) {
    return bad("stable_served", "must be in (0, 1]");
  }
  if (!(o.backoff > 0 && o.backoff < 1)) return bad("backoff", "must be in (0, 1)");
  if (!(o.climb_step > 0 && o.climb_step <= 1)) return bad("climb_step", "must be in (0, 1]");
  if (o.clean_windows < 1 || o.clean_windows > 1000) {
    return bad("clean_windows", "must be in [1, 1000]");
  }
  if (!(o.retry > 0 && o.retry <= 1)) return bad("retry", "must be in (0, 1]");
  if (o.evidence_windows > 1024) return bad("evidence_windows", "must be in [0, 1024]");
  if (!(o.probe_after_s >= 0 && o.probe_after_s <= 1e6)) {
    return bad("probe_after_s", "must be in [0, 1e6]");
  }
  if (!(o.probe_max_s >= o.probe_after_s && o.probe_max_s <= 1e6)) {
    return bad("probe_max_s", "must be in [probe_after_s, 1e6]");
  }
  return Status();
}

std::string_view to_string(AdmissionPhase p) {
  switch (p) {
    case AdmissionPhase::kWhole:
      return "whole";
    case AdmissionPhase::kShed:
      return "shed";
    case AdmissionPhase::kPaused:
      return "paused";
    case AdmissionPhase::kProbing:
      return "probing";
  }
  return "?";
}

Predicted as_predicted(const std::array<double, kTargetCount>& measured) {
  Predicted p;
  for (Target t : surrogate::kAllTargets) {
    const double v = measured[static_cast<std::size_t>(t)];
    field(p, t) = std::isfinite(v) ? static_cast<float>(v) : 0.0f;
  }
  p.throughput = std::numeric_limits<float>::max();
  return p;
}

// ---------------------------------------------------------------------------------------------
// One model's state machine

AdmissionPhase AdmissionState::phase() const {
  if (share_ >= 1) return AdmissionPhase::kWhole;
  if (probing_ || (share_ <= 0 && probe_due_)) return AdmissionPhase::kProbing;
  return share_ <= 0 ? AdmissionPhase::kPaused : AdmissionPhase::kShed;
}

void AdmissionState::decided(double share, bool probe) {
  share_ = share;
  if (share > 0) paused_since_s_ = -1;
  if (probe) {
    probe_due_ = false;
    probing_ = true;
  }
}

bool AdmissionState::measured(double share, bool breached, bool failed_test,
                              const AdmissionOptions& o) {
  const bool probe = std::exchange(probing_, false);
  if (probe) {
    // What the probe measured sets the next wait: doubled after a failure, restored after a
    // window that held.
    const double wait = probe_wait_s_ > 0 ? probe_wait_s_ : o.probe_after_s;
    probe_wait_s_ =
        breached || failed_test ? std::min(2 * wait, o.probe_max_s) : o.probe_after_s;
  }
  // A window admitted on the planner's test (a probe was not) that measured what the test would
  // refuse counts as a breach: the prediction that admitted the share is refuted.
  if (breached || (!probe && failed_test)) {
    smallest_breach_ = std::min(smallest_breach_, share);
    ceiling_ = std::min(ceiling_, share) * o.backoff;
    clean_ = 0;
  } else if (++clean_ >= o.clean_windows) {
    ceiling_ = std::max(ceiling_, std::min(ceiling_ + o.climb_step, o.retry * smallest_breach_));
    clean_ = 0;
  }
  return probe;
}

void AdmissionState::remember(const ShedWindow& w, const AdmissionOptions& o) {
  evidence_.push_back(w);
  while (evidence_.size() > o.evidence_windows) evidence_.pop_front();
}

void AdmissionState::demand_changed() {
  ceiling_ = smallest_breach_ = 1;
  evidence_.clear();
}

void AdmissionState::gpu_faster() {
  const bool paused = share_ <= 0;
  demand_changed();
  if (paused) probe_due_ = true;
}

bool AdmissionState::paused_at(double now_s, const AdmissionOptions& o) {
  if (share_ > 0 || probe_due_ || probing_ || o.probe_after_s <= 0) return false;
  if (paused_since_s_ < 0) {
    paused_since_s_ = now_s;
    return false;
  }
  const double wait = probe_wait_s_ > 0 ? probe_wait_s_ : o.probe_after_s;
  if (now_s - paused_since_s_ < wait) return false;
  probe_due_ = true;
  paused_since_s_ = -1;  // counted again from the pause after the probe
  return true;
}

bool AdmissionState::refutes(const ModelSpec& spec, std::int32_t local, double share, double u,
                             const Margin& margin) const {
  constexpr double kSame = 1e-6;  // shares and loads computed the same way twice
  return std::any_of(evidence_.begin(), evidence_.end(), [&](const ShedWindow& w) {
    return w.local == local && w.share <= share + kSame && w.others_load <= u + kSame &&
           sla_excess(spec, w.measured, margin) > 0;
  });
}

// ---------------------------------------------------------------------------------------------
// The rule's predicates

namespace {

// Whether model `m` in configuration `local` keeps up with `share` of its demand at
// `throughput` (predicted or measured): its served fraction of the admitted demand, frame
// skipping aside, is at least AdmissionOptions::stable_served.
bool keeps_up(const ModelSpec& m, std::int32_t local, double share, double throughput,
              const AdmissionOptions& o) {
  const Settings s = m.settings(static_cast<std::size_t>(local));
  const double keep = m.arch.family == ModelFamily::kVision ? 1 - s.skip_rate : 1.0;
  return served_fraction(m, s, throughput / share) >= o.stable_served * keep;
}

// Whether a candidate holds model m at `share` of the demand `spec` states: its SLA holds as
// predicted at its margin, and the source's throughput at that share keeps up with what it
// admits. The source's, not the corrected one: a throughput correction is learned at the shares
// that ran, mostly where the model kept up with its demand, so it measures the source's error at
// that demand and its count noise (a few requests a window at a small share), not a capacity;
// carried to another share it would refuse shares the model serves. A share beyond the model's
// capacity breaches as measured (its queue grows), and the ceiling backs off.
bool holds_admitted(const ModelSpec& spec, double share, const Decision& d, std::size_t m,
                    const AdmissionOptions& o) {
  if (d.best_effort[m] || d.config[m] == kAbsent) return false;
  const double throughput = m < d.base.size() ? d.base[m].throughput : d.predicted[m].throughput;
  return keeps_up(spec, d.config[m], share, throughput, o);
}

void scale_demand(ModelSpec& m, double share) {
  m.demand.fps *= share;
  m.demand.rps *= share;
}

}  // namespace

bool sheddable(const ModelSpec& m) {
  return !m.demand.closed_loop() && !m.sla.min_throughput && (m.demand.fps > 0 || m.demand.rps > 0);
}

bool overloaded(const ModelSpec& spec, double share, const ModelObservation& o,
                const AdmissionOptions& options) {
  const double thr = o.measured[static_cast<std::size_t>(Target::kThroughput)];
  if (!std::isfinite(thr) || share <= 0) return false;
  return !keeps_up(spec, o.local, share, thr, options);
}

Workload admitted_workload(const Workload& w, std::span<const double> admitted) {
  Workload out = w;
  for (std::size_t m = 0; m < out.models.size() && m < admitted.size(); ++m) {
    if (admitted[m] >= 1) continue;
    if (admitted[m] <= 0) {
      out.models[m].active = false;
    } else {
      scale_demand(out.models[m], admitted[m]);
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// The policy around the search

namespace {

// Why each shed model could not be held with all of its demand, and what it admits instead
// (`why`: the first search's reasons); the models that still run best effort keep the reasons of
// the last search, and a model held as predicted below its ceiling says so.
std::vector<Infeasibility> admission_reasons(const Workload& w, const Decision& d,
                                             const std::vector<Infeasibility>& why,
                                             std::span<const double> admitted,
                                             std::span<const AdmissionState> states) {
  std::vector<Infeasibility> merged;
  for (const auto& i : why) {
    if (admitted[i.model] < 1) {
      merged.push_back(i);
      merged.back().admitted = admitted[i.model];
    }
  }
  for (const auto& i : d.infeasible) {
    const bool known = std::any_of(why.begin(), why.end(),
                                   [&](const Infeasibility& k) { return k.model == i.model; });
    if (admitted[i.model] >= 1) {
      merged.push_back(i);
    } else if (!known) {  // pushed out by another model's admitted share
      merged.push_back(i);
      merged.back().admitted = admitted[i.model];
    }
  }
  for (std::size_t m = 0; m < w.models.size(); ++m) {
    const auto listed = [&](const Infeasibility& i) { return i.model == m; };
    if (admitted[m] >= 1 || d.config[m] == kAbsent || m >= d.margins.size() ||
        std::any_of(merged.begin(), merged.end(), listed)) {
      continue;
    }
    // Held as predicted, but below its ceiling.
    const double breached = m < states.size() ? states[m].smallest_breach() : 1.0;
    merged.push_back(
        measured_ceiling(w.models[m], m, d.config[m], d.predicted[m], d.margins[m], breached));
    merged.back().admitted = admitted[m];
  }
  std::stable_sort(
      merged.begin(), merged.end(),
      [](const Infeasibility& a, const Infeasibility& b) { return a.model < b.model; });
  return merged;
}

}  // namespace

Result<std::optional<Admitted>> admit(const Workload& w, AdmissionCandidate first,
                                      std::span<const AdmissionState> states,
                                      const AdmissionOptions& options,
                                      const AdmissionSearch& search) {
  const std::size_t n = w.models.size();
  auto ceiling = [&](std::size_t m) { return m < states.size() ? states[m].ceiling() : 1.0; };
  auto probe_due = [&](std::size_t m) { return m < states.size() && states[m].probe_due(); };
  // The models given up, and those the search held whose ceiling is below 1: a share that
  // measured beyond its SLA is not admitted again, whatever the prediction at all of the demand.
  std::vector<std::size_t> order;
  for (std::size_t m = 0; m < n && m < first.decision.best_effort.size(); ++m) {
    if (!sheddable(w.models[m]) || first.decision.config[m] == kAbsent) continue;
    if (first.decision.best_effort[m] || ceiling(m) < 1) order.push_back(m);
  }
  if (order.empty()) return std::optional<Admitted>(Admitted{std::move(first), {}});
  // Heaviest first: the models the objective values most keep the most of their demand.
  const auto heaviest_first = [&](std::size_t a, std::size_t b) {
    return w.models[a].weight > w.models[b].weight;
  };
  std::stable_sort(order.begin(), order.end(), heaviest_first);
  const std::vector<Infeasibility> why = first.decision.infeasible;
  // Whether candidate `a` admits `share` of model m's demand against what m measured before.
  auto contradicted = [&](std::size_t m, double share, const AdmissionCandidate& a) {
    const Decision& d = a.decision;
    if (m >= states.size() || states[m].evidence().empty() || d.config[m] == kAbsent ||
        m >= d.margins.size() || !a.table) {
      return false;
    }
    double u = 0;
    for (std::size_t j = 0; j < d.config.size(); ++j) {
      if (j != m) u += a.table->load(j, d.config[j]);  // an absent model's is 0
    }
    return states[m].refutes(w.models[m], d.config[m], share, u, d.margins[m]);
  };
  std::vector<bool> probed(n, false);
  std::vector<double> admitted(n, 1.0);
  Workload runs = w;
  AdmissionCandidate chosen = std::move(first);
  std::vector<bool> queued(n, false);
  for (const std::size_t m : order) queued[m] = true;
  for (std::size_t next = 0; next < order.size(); ++next) {
    const std::size_t m = order[next];
    // An earlier model's refusals may have let it hold.
    if (!chosen.decision.best_effort[m] && ceiling(m) >= 1) continue;
    double lo = 0;
    double hi = 1;
    std::optional<AdmissionCandidate> best;
    std::optional<AdmissionCandidate> smallest;  // the last candidate, when every share failed
    // Below a ceiling left by a measured breach, the ceiling itself is tried first.
    const bool capped = ceiling(m) < 1;
    for (int k = capped ? -1 : 0; k < options.bisection_steps; ++k) {
      const double share = k < 0 ? ceiling(m) : 0.5 * (lo + hi);
      Workload candidate = runs;
      scale_demand(candidate.models[m], share);
      auto a = search(candidate, chosen.decision.config);
      if (!a) return a.error().wrap("admitting part of " + w.models[m].name + "'s demand");
      if (!*a) return std::optional<Admitted>();
      if (holds_admitted(runs.models[m], share, (*a)->decision, m, options) &&
          !contradicted(m, share, **a)) {
        lo = share;
        best = std::move(**a);
        if (k < 0) break;  // the ceiling holds: nothing above it is admitted
      } else {
        hi = share;
        if (k + 1 == options.bisection_steps) smallest = std::move(**a);
      }
    }
    const double probe_share = hi;
    if (best) {
      scale_demand(runs.models[m], lo);
      admitted[m] = lo;
      chosen = std::move(*best);
    } else if (smallest &&
               (probe_due(m) ||
                sla_excess(runs.models[m], smallest->decision.predicted[m], Margin{}) <= 0)) {
      // Its prediction holds at the smallest share and only its margin does not, or a paused
      // model's probe is due (AdmissionState::gpu_faster): it runs there best effort, so that it
      // is observed and its margin or its correction can move (a paused model is never
      // observed, and would stay paused on the prediction that paused it).
      scale_demand(runs.models[m], probe_share);
      admitted[m] = probe_share;
      probed[m] = probe_due(m);
      chosen = std::move(*smallest);
    } else {
      runs.models[m].active = false;
      admitted[m] = 0;
      auto a = search(runs, chosen.decision.config);
      if (!a) return a.error().wrap("pausing " + w.models[m].name);
      if (!*a) return std::optional<Admitted>();
      chosen = std::move(**a);
    }
    // The plan that admits this share may leave another model best effort that the first
    // search held: it is shed in turn, rather than run with all of its demand unheld.
    std::vector<std::size_t> pushed_out;
    for (std::size_t j = 0; j < n && j < chosen.decision.best_effort.size(); ++j) {
      if (!queued[j] && chosen.decision.best_effort[j] && sheddable(w.models[j])) {
        pushed_out.push_back(j);
        queued[j] = true;
      }
    }
    std::stable_sort(pushed_out.begin(), pushed_out.end(), heaviest_first);
    order.insert(order.end(), pushed_out.begin(), pushed_out.end());
  }
  Decision& d = chosen.decision;
  // Utility counts against what was asked for: the refused share earns nothing.
  d.predicted_utility = 0;
  for (std::size_t m = 0; m < n; ++m) {
    if (d.config[m] == kAbsent) continue;
    d.predicted_utility += model_utility(w, m, d.config[m], d.predicted[m]);
  }
  d.infeasible = admission_reasons(w, d, why, admitted, states);
  d.feasible = false;  // some demand is refused
  d.admitted = std::move(admitted);
  return std::optional<Admitted>(Admitted{std::move(chosen), std::move(probed)});
}

}  // namespace corun

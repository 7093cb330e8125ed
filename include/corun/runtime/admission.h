#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "corun/core/result.h"
#include "corun/plan/objective.h"
#include "corun/runtime/decision.h"
#include "corun/runtime/learner.h"
#include "corun/spec/workload.h"
#include "corun/testbed/testbed.h"

namespace corun {

/// @brief Admission control, the degradation rule's last step (docs/scheduler.md, "When nothing
/// is feasible"): a model whose SLA the plan gave up admits only the largest share of its
/// demand with which its SLA holds as predicted — the rest is refused at the door — and is
/// paused when no share does. Every threshold of the rule is declared here once, with its
/// default and its range (check(AdmissionOptions) enforces them).
struct AdmissionOptions {
  /// false: a model whose SLA the plan gave up runs best effort with all of its demand and
  /// breaches.
  bool enabled = true;
  /// Bisection steps of the admitted share (check = [1, 12]): 5 finds it to 1/32 of the demand.
  int bisection_steps = 5;
  /// Predicted served fraction below which an admitted share counts as overloading its model
  /// (check = (0, 1]): a queue that cannot keep up grows through the window, and its latency
  /// with it, whatever a steady-state prediction of that latency says. Not 1: predicted
  /// throughputs carry the co-run slowdown of the surrogate's ratio even where the model keeps
  /// up with its demand.
  double stable_served = 0.9;
  /// The ceiling's multiplicative decrease (AIMD, as TCP's congestion window, halved on a
  /// loss; check = (0, 1)): a shed model that breaches as measured at share f, or measures there
  /// what the planner's own test would refuse (the measured value times 1 + its margin above
  /// the SLA), admits at most backoff × f from then on, even where a later search would hold
  /// all of its demand. The prediction alone would admit the breaching share again: near its
  /// capacity a model's latency turns steeply with its own load, which corrections learned on
  /// the co-runners' load do not capture.
  double backoff = 0.5;
  /// The ceiling's additive increase after `clean_windows` windows that held (check = (0, 1]).
  double climb_step = 1.0 / 32;
  /// Windows that held at an admitted share before the ceiling climbs (check = [1, 1000]).
  int clean_windows = 3;
  /// The climb stops at this fraction of the smallest share that breached (check = (0, 1]):
  /// climbing back to a share that breached would breach again.
  double retry = 0.9;
  /// A shed model's most recent windows kept as evidence against an admission (check = [0,
  /// 1024]; see AdmissionState::refutes): near its capacity a model's latency turns too steeply
  /// with its own load for a correction learned at one share to carry to another.
  std::size_t evidence_windows = 16;
  /// Seconds a paused model waits before it runs one probe window at the smallest share, as a
  /// circuit breaker's half-open timeout (check = [0, 1e6]; 0: only a faster GPU probes it). A
  /// paused model is never measured, so a prediction or a margin that paused it would otherwise
  /// keep it paused for good, whatever the GPU does meanwhile. A probe costs a re-plan and a
  /// window that may breach: 600 s bounds that to one window in 60 of 10 s while the pause
  /// lasts. Waits of 60 s cost utility in the 300 s evaluations (docs/results/transitions.md).
  double probe_after_s = 600;
  /// Each probe that breaches, or measures what the planner's test refuses, doubles the wait,
  /// up to this many seconds (check = [probe_after_s, 1e6]); a probe that holds restores it.
  double probe_max_s = 9600;
};

/// @brief Checks every field of `o` against its declared range; the error names the field
/// ("admission.backoff: ...").
Status check(const AdmissionOptions& o);

/// @brief Where one model stands in admission control.
enum class AdmissionPhase {
  kWhole,    ///< it admits all of its demand
  kShed,     ///< it admits a share of its demand in (0, 1)
  kPaused,   ///< it admits nothing (it is active, but does not run)
  kProbing,  ///< paused, and a faster GPU or the probe wait asked for one window at the
             ///< smallest share; or that window is in force
};
std::string_view to_string(AdmissionPhase p);

/// @brief One window of a model run at a share of its demand below 1: the evidence its later
/// admissions are checked against.
struct ShedWindow {
  std::int32_t local = 0;  ///< its configuration
  double share = 1;        ///< the admitted share of its demand
  double others_load = 0;  ///< its co-runners' load (LoadTable)
  Predicted measured;      ///< what was measured, as_predicted()
};

/// @brief Measured values by Target in the form the SLA test reads: unmeasured ones 0 (they
/// exceed nothing), the throughput unbounded (a sheddable model has no throughput floor).
Predicted as_predicted(const std::array<double, kTargetCount>& measured);

/// @brief One model's admission state machine. Its events:
///   decided(share, probe)    a decision put `share` of its demand in force (whole, shed,
///                            paused, or a probe at the smallest share);
///   measured(window)         a window ran at an admitted share below 1: a breach, or a value
///                            the planner's own test refuses, lowers the ceiling
///                            (AdmissionOptions::backoff); `clean_windows` that held raise it;
///   demand_changed()         its demand, context or SLA changed: what breached or was measured
///                            before says nothing of it now (the ceiling is lifted);
///   gpu_faster()             most models served whole measured faster at once (a co-tenant
///                            left, a power cap was lifted): the ceiling is lifted, and a paused
///                            model — never measured, so never corrected — gets one probe
///                            window, as a circuit breaker's half-open state;
///   paused_at(now_s)         a window passed while it was paused: once it has been paused for
///                            the probe wait (AdmissionOptions::probe_after_s, doubled by each
///                            probe that failed), it gets one probe window, as a circuit
///                            breaker's half-open timeout.
class AdmissionState {
 public:
  [[nodiscard]] AdmissionPhase phase() const;
  /// The largest share a search may admit (1: no ceiling).
  [[nodiscard]] double ceiling() const { return ceiling_; }
  /// The smallest share that breached since the ceiling was last lifted (1: none).
  [[nodiscard]] double smallest_breach() const { return smallest_breach_; }
  /// Paused, and the next decision runs it at the smallest share.
  [[nodiscard]] bool probe_due() const { return probe_due_; }
  [[nodiscard]] const std::deque<ShedWindow>& evidence() const { return evidence_; }

  void decided(double share, bool probe);
  /// What one window at admitted `share` in (0, 1) did. `failed_test`: it breached as measured,
  /// or measured what the planner's test at its margin refuses. Returns whether it was the
  /// probe window (what it measured decides what runs next: a re-plan is due).
  bool measured(double share, bool breached, bool failed_test, const AdmissionOptions& o);
  /// Keeps `w` as evidence (the last AdmissionOptions::evidence_windows of them).
  void remember(const ShedWindow& w, const AdmissionOptions& o);
  void demand_changed();
  void gpu_faster();
  /// A window at time `now_s` (seconds, never decreasing) found it paused. Returns whether a
  /// probe became due with it (a re-plan is due).
  bool paused_at(double now_s, const AdmissionOptions& o);
  /// The probe wait in force (0 before the first pause: AdmissionOptions::probe_after_s).
  [[nodiscard]] double probe_wait_s() const { return probe_wait_s_; }

  /// Whether a kept window refutes admitting `share` of `spec`'s demand in configuration
  /// `local` under co-runners' load `u` at `margin`. A model's latency does not fall as its own
  /// share of its demand or its co-runners' load rise, so a window that measured in `local` at a
  /// share of at most `share`, under a load of at most `u`, what the planner's own test refuses
  /// (its measured value times 1 + `margin` above the SLA) refutes the candidate, whatever the
  /// prediction says.
  [[nodiscard]] bool refutes(const ModelSpec& spec, std::int32_t local, double share, double u,
                             const Margin& margin) const;

 private:
  double share_ = 1;  ///< in force
  double ceiling_ = 1;
  double smallest_breach_ = 1;
  int clean_ = 0;  ///< windows that held at an admitted share since the ceiling last moved
  bool probe_due_ = false;
  bool probing_ = false;  ///< the plan in force runs it as a probe
  double paused_since_s_ = -1;  ///< when the pause in force was first seen (< 0: not paused)
  double probe_wait_s_ = 0;     ///< the half-open timeout in force (0: the option's)
  std::deque<ShedWindow> evidence_;
};

/// @brief Whether refusing part of a model's demand can help it: a rate demand (a closed loop is
/// the client's to throttle) and no throughput floor (refusing work lowers throughput).
bool sheddable(const ModelSpec& m);

/// @brief Whether model `spec`, run at `share` of its demand in configuration `local`, fell
/// behind it in window `o` (its served fraction below AdmissionOptions::stable_served).
bool overloaded(const ModelSpec& spec, double share, const ModelObservation& o,
                const AdmissionOptions& options);

/// @brief `w` as the plan in force runs it: each model's rate demand (fps, rps or in-flight
/// requests) scaled by its admitted share, a paused model inactive. `admitted` empty: `w`.
/// Utility is still counted against `w` (what was asked for): model_utility(w, ...) of a
/// measurement of the admitted workload charges the refused share.
Workload admitted_workload(const Workload& w, std::span<const double> admitted);

/// @brief A searched decision and the corrections it was searched with.
struct AdmissionCandidate {
  Decision decision;
  std::shared_ptr<const CorrectionTable> table;
};

/// @brief The search admission control runs around: a decision for `w` warm-started from
/// `warm`, without optimism. None: the decision was dropped (the workload changed meanwhile).
using AdmissionSearch = std::function<Result<std::optional<AdmissionCandidate>>(
    const Workload& w, const JointConfig& warm)>;

/// @brief What admit() decided.
struct Admitted {
  AdmissionCandidate chosen;
  std::vector<bool> probed;  ///< per model: runs its probe window
};

/// @brief Admission control on `first`, a decision for `w`: each model the search gave up, or
/// held below a ceiling of 1 (`states`, per model), heaviest first, admits the largest share of
/// its demand (to 2^-bisection_steps) with which its SLA holds as predicted and no kept window
/// refutes, else runs a probe or the smallest share whose only failure is its margin, else is
/// paused. A model the admitted shares push out of its SLA is shed in turn. Returns the decision
/// for the admitted workload, with Decision::admitted, the merged infeasibility reasons and
/// utility counted against `w`; none when a search was dropped. Nothing in `states` changes:
/// the caller applies AdmissionState::decided() when the decision is put in force.
Result<std::optional<Admitted>> admit(const Workload& w, AdmissionCandidate first,
                                      std::span<const AdmissionState> states,
                                      const AdmissionOptions& options,
                                      const AdmissionSearch& search);

}  // namespace corun

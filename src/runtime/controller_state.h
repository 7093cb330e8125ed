#pragma once

// Internal to the online controller (controller.cc, decide.cc, learn.cc, transitions.cc): what
// it keeps per model, and the helpers its parts share.

#include <array>
#include <cstdint>
#include <deque>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "corun/plan/sla_keys.h"
#include "corun/runtime/admission.h"
#include "corun/runtime/controller.h"
#include "corun/runtime/learner.h"

namespace corun {

namespace detail {

// Weight of one observation in the moving average of a model's absolute prediction error.
inline constexpr double kErrorAverageWeight = 0.1;
// Windows of the current workload kept to re-base the learners on a refit surrogate.
inline constexpr std::size_t kRecentWindows = 64;

// kSlaKeys' slots are the surrogate's targets.
static_assert(kSlaKeys[0].index == static_cast<std::size_t>(Target::kTtftP95));
static_assert(kSlaKeys[1].index == static_cast<std::size_t>(Target::kTpotP95));
static_assert(kSlaKeys[2].index == static_cast<std::size_t>(Target::kLatencyP95));
static_assert(kSlaKeys[3].index == static_cast<std::size_t>(Target::kThroughput));

// The SLA latency targets of a model, in kSlaKeys order (TTFT, then TPOT, then request
// latency).
inline std::vector<Target> sla_targets(const ModelSpec& m) {
  std::vector<Target> out;
  for (const SlaKey& k : sla_keys(m)) {
    if (!k.floor) out.push_back(static_cast<Target>(k.index));
  }
  return out;
}

// The target whose error a model reports: its first SLA latency, else its family's latency.
inline Target primary_target(const ModelSpec& m) {
  const auto t = sla_targets(m);
  if (!t.empty()) return t.front();
  return m.arch.family == ModelFamily::kLlm ? Target::kTtftP95 : Target::kLatencyP95;
}

inline std::vector<std::string> names_of(const Workload& w) {
  std::vector<std::string> out;
  for (const auto& m : w.models) out.push_back(m.name);
  return out;
}

}  // namespace detail

// What the controller keeps of one model: its error learners, admission state and dwell clock.
struct Controller::ModelState {
  std::string key;
  std::array<TargetLearner, kTargetCount> target;
  bool ready = false;  // priors applied (at the first decision that saw the model)
  double boost = 0;    // learning off: margin grown by breaches
  double abs_error = 0;
  double last_error = 0;
  std::uint64_t observations = 0;
  std::uint64_t breaches = 0;
  bool reopened = false;     // reopened since its last sample: the next sample says so
  AdmissionState admission;  // ControllerOptions::admission

  // When its last reload- or restart-class change was put in force (TransitionOptions).
  double changed_at_s = -std::numeric_limits<double>::infinity();

  // The model's operating point moved: see TargetLearner::reopen.
  void reopen() {
    reopened = true;
    if (!ready) return;  // its priors are still to come
    for (auto& t : target) t.reopen();
  }
};

// Recent windows of the current workload: their configuration and what was measured.
struct Controller::Recent {
  std::deque<std::pair<JointConfig, std::vector<ModelObservation>>> windows;
};

}  // namespace corun

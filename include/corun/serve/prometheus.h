#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "corun/runtime/controller.h"
#include "corun/serve/metrics.h"
#include "corun/serve/stack_telemetry.h"

namespace corun::serve {

/// @brief What `/metrics` shows of the service's state besides its counters: registered
/// models, the plan in force, SLA breaches per model and each model's learning state.
struct ServeGauges {
  std::size_t models = 0;
  std::int64_t plan_id = 0;
  std::vector<std::pair<std::string, std::uint64_t>> breaches;  ///< (model, observed breaches)
  std::vector<std::pair<std::string, ModelLearningState>> learning;  ///< (model, state)
  /// One model of the plan in force: whether the plan holds its SLA with all of its demand,
  /// whether it runs best effort (its SLA given up), and the share of its demand admitted.
  struct PlanModel {
    std::string model;
    bool feasible = true;
    bool best_effort = false;
    double admitted = 1;
  };
  std::vector<PlanModel> plan_models;
  /// Stack telemetry (corun serve --prometheus); absent without it.
  struct StackModel {
    std::string model;
    bool learned = false;                     ///< its last window taught the controller
    std::vector<DataQuality> issues;          ///< what was wrong with its last window
  };
  std::optional<bool> prometheus_up;
  std::vector<StackModel> stack;
  /// The GPU (--dcgm): measured SM activity, what the plan in force predicts, and whether an
  /// unexplained load is reported; absent when not read or not comparable.
  std::optional<double> gpu_sm_active;
  std::optional<double> gpu_sm_active_predicted;
  std::optional<bool> gpu_unexplained_load;
  /// The SM share of the unexplained load the planner predicts every model beside (0: none).
  std::optional<double> gpu_planned_load_sm;
};

/// @brief The Prometheus text exposition (format 0.0.4) of `corun serve`: request counters by
/// route and status, the decision latency histogram, telemetry and re-plan counters, then the
/// gauges. Model names need no escaping: the spec allows only [A-Za-z0-9_.-] in them.
/// Thread-safety: pure function.
std::string render_prometheus(const Metrics::Snapshot& counters, const ServeGauges& gauges);

}  // namespace corun::serve

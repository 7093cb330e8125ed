#pragma once

#include <map>
#include <memory>
#include <string>

#include "corun/plan/node.h"
#include "corun/runtime/predictor_source.h"
#include "corun/testbed/node.h"

namespace corun {

/// @brief Unit predictions from predictor sources: whole GPUs of the workload's device from
/// `whole` (a fitted surrogate, or the catalog twin), units of any other device (MIG slices,
/// which no surrogate fitted on the whole GPU has seen) from `other`. Each device's unit
/// workload and predictor are built once and kept. Not thread-safe.
class SourceUnitModels final : public UnitModels {
 public:
  /// @param w the node workload (outlives this object)
  /// @param whole predictions for whole GPUs (outlives this object)
  /// @param other predictions for other devices (outlives this object; may be `whole`)
  SourceUnitModels(const Workload& w, PredictorSource& whole, PredictorSource& other);
  Result<const UnitModel*> for_unit(const GpuUnit& unit) override;

 private:
  struct Entry {
    std::unique_ptr<Workload> workload;  // stable address: the predictor may refer to it
    std::unique_ptr<Predictor> predictor;
    UnitModel model;
  };
  const Workload* w_;
  PredictorSource* whole_;
  PredictorSource* other_;
  std::map<std::string, Entry> by_device_;
};

/// @brief A node plan and what the testbed measured when it ran: ground truth for comparing
/// node planners. Utility and violations are computed on the measurement only.
struct NodeOutcome {
  NodePlan plan;
  NodeMeasurement measured;
  double measured_utility = 0;  ///< sum over models that ran of their utility, as measured
  /// Active models that breached an SLA as measured, could not run, or were not placed.
  std::size_t violations = 0;
};

/// @brief Runs `plan` on `testbed` (measure_node) and scores what it measured.
NodeOutcome measure_node_plan(const Workload& w, NodePlan plan, const Testbed& testbed,
                              const MeasureOptions& options);

}  // namespace corun

#pragma once

#include <map>
#include <memory>
#include <string>

#include "corun/core/context.h"
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

/// @brief How many GPUs of the workload's device a workload needs (issue: capacity answers):
/// the smallest node of whole GPUs, from `from_gpus` to `max_gpus`, on which the node planner
/// finds a feasible plan (every model placed, every SLA held as predicted), and that plan.
struct CapacityAnswer {
  std::size_t gpus = 0;  ///< 0: no node up to `tried_up_to` GPUs holds it
  std::size_t tried_up_to = 0;
  NodePlan plan;  ///< on `gpus` GPUs (the last node tried when none holds it)
  Workload node;  ///< the workload as the node of `gpus` GPUs it was planned as
};

/// @brief Plans `w` (its models; its node ignored, every MIG partition set aside) on 1 GPU..
/// `max_gpus` GPUs of its device, starting at `from_gpus`, with `whole` predicting whole
/// GPUs and `solver` per GPU, and stops at the first feasible node. The predictions of a node
/// of k GPUs are those of one GPU (a GPU's co-runners are the models placed on it).
Result<CapacityAnswer> gpus_needed(const Context& ctx, const Workload& w, PredictorSource& whole,
                                   const Solver& solver, const NodePlanOptions& options,
                                   std::size_t from_gpus, std::size_t max_gpus);

/// @brief Runs `plan` on `testbed` (measure_node) and scores what it measured.
NodeOutcome measure_node_plan(const Context& ctx, const Workload& w, NodePlan plan,
                              const Testbed& testbed, const MeasureOptions& options);

}  // namespace corun

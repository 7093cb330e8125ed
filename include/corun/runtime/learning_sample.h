#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "corun/core/result.h"
#include "corun/runtime/learner.h"

namespace corun {

/// @brief What one observation taught, as stored for replay (serve's state, a resumed run):
/// enough to rebuild the learners without the predictor that was used.
struct LearningSample {
  std::string model;      ///< model name
  std::string model_key;  ///< its catalog model and knob values: local indices mean nothing else
  std::int32_t local = 0;
  double others_load = NAN;  ///< its co-runners' load (LoadTable) in that window
  /// Where a change in this window was: of the whole GPU (several models changed together) or of
  /// this model's configuration alone.
  TargetLearner::ChangeHint hint = TargetLearner::ChangeHint::kUnknown;
  /// log(measured / base prediction) per target (NaN: not observed)
  std::array<double, kTargetCount> log_ratio{NAN, NAN, NAN, NAN};
  double under_prediction = 1;  ///< measured / predicted of the SLA latencies (learning off)
  bool breach = false;
  double error = NAN;  ///< measured / predicted − 1 of the SLA latency
  /// The model's demand or context changed before this window: its learners were reopened
  /// (TargetLearner::reopen) first, and a replay does the same.
  bool reopen = false;
  /// The admitted share of its demand in that window (below 1: shed, docs/scheduler.md).
  double share = 1;
  /// What was measured, by Target (NaN: not observed): a shed model's windows are the evidence
  /// its later admissions are checked against.
  std::array<double, kTargetCount> measured{NAN, NAN, NAN, NAN};
};

/// @brief The JSON form of a learning sample (serve's stored state).
nlohmann::json to_json(const LearningSample& s);
/// @brief Reads a learning sample back; errors name the field.
Result<LearningSample> learning_sample_from_json(const nlohmann::json& j);

}  // namespace corun

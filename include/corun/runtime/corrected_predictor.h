#pragma once

#include <memory>

#include "corun/plan/predictor.h"
#include "corun/runtime/learner.h"

namespace corun {

/// @brief A base predictor (surrogate or twin) times the online corrections of one decision.
/// A correction depends only on a model's own configuration, so an AggregatePredictor base
/// stays one (same aggregate, same monotonicity: the exact solver's proof still holds).
/// Immutable and thread-safe like its base.
/// @param base the source's predictor (shared: the controller also asks it for the plan's
/// uncorrected predictions)
/// @param corrections the learners' snapshot for this decision (shared, immutable)
std::unique_ptr<Predictor> make_corrected(std::shared_ptr<const Predictor> base,
                                          std::shared_ptr<const CorrectionTable> corrections);

}  // namespace corun

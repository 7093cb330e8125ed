#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "corun/runtime/controller.h"
#include "corun/serve/registry.h"

namespace corun::serve {

/// @brief The per-model part of a plan record (GET /v1/plan's "models"): for each model of
/// `w`, its local index, knob settings, margin, corrected and base predictions, and whether its
/// SLA was given up. Thread-safety: pure function.
nlohmann::json decision_models_json(const Decision& d, const Workload& w);
/// @brief One SLA a plan cannot hold, as POST /v1/whatif names it. Thread-safety: pure function.
nlohmann::json infeasibility_json(const Infeasibility& i);
/// @brief One model's learning state (GET /v1/plan's and GET /v1/telemetry's "learning").
/// Thread-safety: pure function.
nlohmann::json learning_state_json(const ModelLearningState& s);

/// @brief The decision a stored plan record describes, when it covers exactly the registered
/// models (same names, local indices in range); none otherwise (then a re-plan is due).
/// @throws nlohmann::json::exception for a field of the wrong type or range (a damaged record).
/// Thread-safety: pure function.
std::optional<Decision> decision_in_force(const nlohmann::json& record,
                                          const ModelRegistry& registry);

/// @brief A plan record serialised as GET /v1/plan serves it (one line, newline-terminated).
/// Thread-safety: pure function.
std::string plan_body(const nlohmann::json& record);

}  // namespace corun::serve

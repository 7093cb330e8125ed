#pragma once

#include <cstddef>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "corun/catalog/catalog.h"
#include "corun/core/result.h"
#include "corun/spec/knobs.h"
#include "corun/spec/workload.h"

namespace corun::exporting {

/// @brief Which corun output a plan was read from.
enum class PlanKind {
  kPlanJson,    ///< `corun plan --json`: one decision, `models` a list of {name, config}
  kRunReport,   ///< a `corun run` report.json: the plan in force in its last interval
  kServedPlan,  ///< `GET /v1/plan` of `corun serve`: `models` a map of {settings, config}
};

/// @brief "corun plan --json", "run report", "served plan".
std::string_view to_string(PlanKind k);

/// @brief One model the plan runs, resolved against its workload.
struct PlannedModel {
  std::size_t model = 0;        ///< index into PlanInput::workload.models
  std::size_t local_index = 0;  ///< local configuration in that workload's numbering
  Settings settings;            ///< every knob's value (searched and fixed)
  /// The share of the model's demand the plan admits (served plans: `admitted` of the model;
  /// run reports: the interval's `admitted`, one per workload model); 1 when not stated.
  double admitted = 1;
};

/// @brief A plan ready to export: the workload as it stood while the plan was in force
/// (demand and context events of a run's timeline applied up to the plan's interval) and the
/// settings of every model the plan runs, in the workload's order. Models the plan does not
/// run (departed, inactive, out of VRAM) are absent.
struct PlanInput {
  std::string plan_file;  ///< where the plan was read from
  PlanKind kind = PlanKind::kPlanJson;
  std::string label;  ///< what the plan is, for headers: "report.json, interval t=290"
  Workload workload;
  std::vector<PlannedModel> models;
  /// Each model's entry as its workload file writes it, as JSON: the `corun.io/model`
  /// annotation of its pod (`--format k8s`), by model name.
  std::map<std::string, nlohmann::json> entries;

  /// @brief The workload entry of `p`.
  [[nodiscard]] const ModelSpec& spec(const PlannedModel& p) const {
    return workload.models[p.model];
  }
};

/// @brief Reads a plan from JSON text: `corun plan --json` output, a `corun run` report.json
/// (its last interval's plan), or a served plan (`GET /v1/plan`). The workload is
/// `workload_override` when not empty, else the file the plan names (`workload`); a served
/// plan names none. Every model, knob and value of the plan must exist in the workload, a
/// report's `workload_hash` must match the workload file and the device must be the
/// workload's: anything else is a plan for another workload.
/// @param text the plan JSON
/// @param plan_file where `text` came from, used in every error ("FILE: field: reason")
/// @param workload_override a workload file to use instead of the one the plan names
/// @param catalog catalog the workload is validated against
/// @return the plan, or an Error of kind kInvalidInput naming the file, the field and the
/// reason (kNotFound when a file cannot be read)
/// Thread-safety: reads the workload file; otherwise pure.
Result<PlanInput> parse_plan_input(std::string_view text, const std::string& plan_file,
                                   const std::string& workload_override, const Catalog& catalog);

/// @brief parse_plan_input() on the contents of `plan_file`.
Result<PlanInput> load_plan_input(const std::filesystem::path& plan_file,
                                  const std::string& workload_override, const Catalog& catalog);

}  // namespace corun::exporting

#pragma once

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "corun/core/result.h"
#include "corun/runtime/online_run.h"

namespace corun {

/// @brief The JSON form of a run: provenance, one record per interval (plan, predicted and
/// measured metrics, SLA status, decision time) and a summary.
nlohmann::json report_json(const RunReport& r, const Workload& w);

/// @brief A self-contained HTML page (inline SVG, no scripts or external files): the models with
/// their demand, SLAs and worst measured values; objective over time; the configuration each
/// model ran in each interval (band chart and table); the GPU state over time (SM and bandwidth
/// utilisation, VRAM, power, clock); per model and SLA metric, measured against predicted with
/// the planned bound (the margin band) and the limit; prediction error over time; the events
/// (told to the planner or not) and every interval; why a plan was infeasible.
std::string report_html(const RunReport& r, const Workload& w);

/// @brief Writes report.json and report.html into `dir` (created if missing), atomically.
Status write_report(const RunReport& r, const Workload& w, const std::filesystem::path& dir);

}  // namespace corun

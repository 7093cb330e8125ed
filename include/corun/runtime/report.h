#pragma once

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "corun/core/result.h"
#include "corun/runtime/controller.h"

namespace corun {

/// @brief The JSON form of a run: provenance, one record per interval (plan, predicted and
/// measured metrics, SLA status, decision time) and a summary.
nlohmann::json report_json(const RunReport& r, const Workload& w);

/// @brief A self-contained HTML page (inline SVG, no scripts or external files): objective over
/// time, predicted vs measured, and each model's SLA metric against its limit.
std::string report_html(const RunReport& r, const Workload& w);

/// @brief Writes report.json and report.html into `dir` (created if missing), atomically.
Status write_report(const RunReport& r, const Workload& w, const std::filesystem::path& dir);

}  // namespace corun

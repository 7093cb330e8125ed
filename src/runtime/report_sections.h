#pragma once

// Sections of report.html beyond the SLA charts: who ran what, the GPU over time, the events.
// Private to the runtime layer; report_html() (report.cc) puts the page together.

#include <string>
#include <utility>
#include <vector>

#include "corun/core/svg.h"
#include "corun/runtime/online_run.h"

namespace corun::report {

/// @brief What `mm` measured of the SLA key in slot `index` (SlaKey::index); NaN when it did not
/// measure it.
double measured_value(const ModelMetrics& mm, std::size_t index);

/// @brief A line chart over the run's time axis (inline SVG), or a note when no series holds
/// a finite value.
std::string time_chart(const std::string& title, const std::string& y_label,
                       std::vector<SvgSeries> series,
                       std::vector<std::pair<double, std::string>> markers = {}, int height = 300);

/// @brief The models table: catalog model, family, demand, every SLA with its limit, and the
/// measured breaches and worst measured value against each limit over the run.
std::string models_section(const RunReport& r, const Workload& w);

/// @brief The configuration timeline: an SVG band chart (one lane per model, one segment per
/// stretch of intervals with the same configuration, measured breaches marked) and the exact
/// knob values of every model in every interval, changes highlighted.
std::string configuration_section(const RunReport& r, const Workload& w);

/// @brief The GPU over time as the testbed measured it: SM and DRAM bandwidth utilisation,
/// VRAM against the device's, board power against TDP and any power cap, and the clock.
std::string gpu_section(const RunReport& r, const Workload& w);

/// @brief The intervals where something happened: workload events (told to the planner), drift
/// (not told), re-plans that changed the plan (reason, decision time), refits and measured
/// breaches.
std::string events_section(const RunReport& r);

}  // namespace corun::report

// The surrogate evaluation's machine-readable report (JSON) and its figures (SVG).
#include "corun/eval/surrogate_eval.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>

#include "corun/core/svg.h"
#include "corun/core/version.h"
#include "surrogate_eval_internal.h"

namespace corun::eval {

namespace {

using detail::kMacroGoal;

nlohmann::json num(double v) {
  return std::isfinite(v) ? nlohmann::json(std::round(v * 1e4) / 1e4) : nlohmann::json(nullptr);
}

}  // namespace

nlohmann::json to_json(const SurrogateEvalReport& r) {
  nlohmann::json j;
  j["workload"] = r.workload;
  j["workload_hash"] = r.workload_hash;
  j["device"] = r.device;
  j["testbed"] = r.testbed;
  j["seed"] = r.context.seed;
  j["heldout"] = r.heldout;
  j["heldout_repeats"] = r.heldout_repeats;
  j["onboarding_regressor"] = r.onboarding_regressor;
  j["standalone_repeats"] = r.standalone_repeats;
  j["noise_ceiling"] = nlohmann::json::array();
  for (const auto& c : r.ceilings) {
    j["noise_ceiling"].push_back(
        {{"n", c.n}, {"r2_pooled_retest", num(c.r2_pooled)}, {"r2_macro_retest", num(c.r2_macro)}});
  }
  j["corun_version"] = std::string(version());
  j["git_hash"] = std::string(git_hash());
  j["rows"] = nlohmann::json::array();
  for (const auto& row : r.rows) {
    nlohmann::json per_model = nlohmann::json::object();
    for (std::size_t m = 0; m < row.r2_per_model.size(); ++m) {
      per_model[r.model_names[m]] = num(row.r2_per_model[m]);
    }
    j["rows"].push_back({{"n", row.n},
                         {"surrogate", row.surrogate},
                         {"regressor", row.regressor},
                         {"budget", row.budget},
                         {"standalone_measurements", row.standalone_measurements},
                         {"r2_pooled", num(row.r2_pooled)},
                         {"r2_macro", num(row.r2_macro)},
                         {"r2_pooled_single", num(row.r2_pooled_single)},
                         {"r2_macro_single", num(row.r2_macro_single)},
                         {"mape", num(row.mape)},
                         {"seeds", row.seeds},
                         {"r2_throughput", num(row.r2_throughput)},
                         {"coverage95", num(row.coverage95)},
                         {"r2_per_model", per_model},
                         {"heldout_points", row.heldout_points}});
  }
  j["budget_for_r2_095"] = nlohmann::json::array();
  for (const auto& b : r.needed) {
    j["budget_for_r2_095"].push_back(
        {{"n", b.n},
         {"surrogate", b.surrogate},
         {"regressor", b.regressor},
         {"budget_for_r2_095", b.budget ? nlohmann::json(*b.budget) : nlohmann::json(nullptr)},
         {"budget_for_r2_macro_090",
          b.budget_macro ? nlohmann::json(*b.budget_macro) : nlohmann::json(nullptr)}});
  }
  j["onboarding"] = nlohmann::json::array();
  for (const auto& o : r.onboarding) {
    j["onboarding"].push_back({{"n", o.n},
                               {"model", o.model},
                               {"budget", o.budget},
                               {"r2", num(o.r2)},
                               {"mape", num(o.mape)},
                               {"r2_reference_meanfield", num(o.r2_reference)},
                               {"r2_standalone_only", num(o.r2_standalone_only)},
                               {"mape_standalone_only", num(o.mape_standalone_only)},
                               {"r2_others", num(o.r2_others)},
                               {"seeds", o.seeds}});
  }
  return j;
}

std::string svg_r2_vs_budget(const SurrogateEvalReport& r) {
  SvgPlot p;
  p.title = r.workload + " (" + r.device + "): macro R^2 on held-out configurations";
  p.x_label = "co-run measurements (budget)";
  p.y_label = "macro R^2 (log latency)";
  p.log_x = true;
  p.y_min = 0.5;
  p.y_max = 1.0;
  p.reference_y = kMacroGoal;
  std::map<std::pair<std::size_t, std::string>, SvgSeries> lines;
  for (const auto& row : r.rows) {
    if (row.surrogate != "meanfield" || row.regressor != "mlp") continue;
    auto& s = lines[{row.n, row.surrogate}];
    s.label = "MeanField MLP, N=" + std::to_string(row.n);
    s.x.push_back(static_cast<double>(row.budget));
    s.y.push_back(row.r2_macro);
  }
  for (const auto& row : r.rows) {
    if (row.surrogate != "joint") continue;
    auto& s = lines[{row.n, row.surrogate}];
    s.label = "Joint MLP, N=" + std::to_string(row.n);
    s.dashed = true;
    s.x.push_back(static_cast<double>(row.budget));
    s.y.push_back(row.r2_macro);
  }
  for (auto& [key, s] : lines) {
    if (key.second == "meanfield") p.series.push_back(s);
  }
  for (auto& [key, s] : lines) {
    if (key.second == "joint") p.series.push_back(s);
  }
  return p.render();
}

std::string svg_budget_vs_n(const SurrogateEvalReport& r) {
  SvgPlot p;
  p.title = r.workload + " (" + r.device + "): co-run budget needed";
  p.x_label = "co-running models N";
  p.y_label = "co-run measurements needed";
  p.y_min = 0;
  std::map<std::string, SvgSeries> macro, pooled;
  std::vector<std::size_t> ns;
  for (const auto& b : r.needed) {
    const std::string key = b.surrogate + " " + b.regressor;
    auto& m = macro[key];
    m.label = key + ": macro R^2 >= 0.90";
    m.x.push_back(static_cast<double>(b.n));
    m.y.push_back(b.budget_macro ? static_cast<double>(*b.budget_macro) : NAN);
    if (b.surrogate == "meanfield" && b.regressor == "mlp") {
      auto& q = pooled[key];
      q.label = key + ": pooled R^2 >= 0.95";
      q.dashed = true;
      q.x.push_back(static_cast<double>(b.n));
      q.y.push_back(b.budget ? static_cast<double>(*b.budget) : NAN);
    }
    if (std::find(ns.begin(), ns.end(), b.n) == ns.end()) ns.push_back(b.n);
  }
  for (auto& [k, s] : macro) p.series.push_back(s);
  for (auto& [k, s] : pooled) p.series.push_back(s);
  SvgSeries ref;
  ref.label = "20 N (paper)";
  ref.dashed = true;
  for (auto n : ns) {
    ref.x.push_back(static_cast<double>(n));
    ref.y.push_back(20.0 * static_cast<double>(n));
  }
  p.series.push_back(ref);
  return p.render();
}

}  // namespace corun::eval

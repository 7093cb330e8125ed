#include "corun/serve/plan_record.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>

#include "corun/core/json_number.h"
#include "corun/core/strings.h"

namespace corun::serve {

namespace {

using nlohmann::json;

json predicted_json(const Predicted& p) {
  auto num = [](float v) -> json {
    if (!std::isfinite(v) || v >= std::numeric_limits<float>::max()) return nullptr;
    return static_cast<double>(v);
  };
  return {{"latency_ms_p95", num(p.latency_ms_p95)},
          {"ttft_ms_p95", num(p.ttft_ms_p95)},
          {"tpot_ms_p95", num(p.tpot_ms_p95)},
          {"throughput", num(p.throughput)}};
}

// A stored plan's per-model prediction back as Predicted (null or absent fields: 0).
Predicted predicted_or_zero(const json& j) {
  Predicted p;
  if (!j.is_object()) return p;
  auto get = [&](const char* k) {
    const auto it = j.find(k);
    if (it == j.end() || !it->is_number()) return 0.0F;
    return static_cast<float>(it->get<double>());
  };
  p.latency_ms_p95 = get("latency_ms_p95");
  p.ttft_ms_p95 = get("ttft_ms_p95");
  p.tpot_ms_p95 = get("tpot_ms_p95");
  p.throughput = get("throughput");
  return p;
}

// "imgsz=640,precision=awq" -> {"imgsz": 640, "precision": "awq"}.
json settings_json(const std::string& described) {
  json out = json::object();
  for (const auto& kv : split(described, ',')) {
    const auto eq = kv.find('=');
    if (eq == std::string::npos) continue;
    const std::string key = kv.substr(0, eq);
    const std::string value = kv.substr(eq + 1);
    char* end = nullptr;
    const double d = std::strtod(value.c_str(), &end);
    if (!value.empty() && end != nullptr && *end == '\0') {
      out[key] = d;
    } else {
      out[key] = value;
    }
  }
  return out;
}

json margin_json(const Margin& g) {
  return {{"latency", g.latency}, {"ttft", g.ttft}, {"tpot", g.tpot}};
}

Margin margin_from_json(const json& j) {
  Margin g;
  if (j.is_number()) return Margin::uniform(j.get<double>());
  if (!j.is_object()) return g;
  g.latency = j.value("latency", 0.0);
  g.ttft = j.value("ttft", 0.0);
  g.tpot = j.value("tpot", 0.0);
  return g;
}

}  // namespace

json decision_models_json(const Decision& d, const Workload& w) {
  json models = json::object();
  for (std::size_t m = 0; m < d.config.size() && m < w.models.size(); ++m) {
    const auto l = d.config[m];
    json e = {{"index", l},
              {"margin", margin_json(d.margins[m])},
              {"predicted", predicted_json(d.predicted[m])},
              {"base", predicted_json(d.base[m])},
              {"best_effort", m < d.best_effort.size() && d.best_effort[m]},
              // The share of its demand to admit (1: all; 0: paused): a front end refuses the
              // rest (docs/scheduler.md, "When nothing is feasible").
              {"admitted", m < d.admitted.size() ? d.admitted[m] : 1.0}};
    if (l >= 0) {
      const std::string desc = w.models[m].describe(static_cast<std::size_t>(l));
      e["settings"] = desc;
      e["config"] = settings_json(desc);
    }
    models[w.models[m].name] = e;
  }
  return models;
}

json infeasibility_json(const Infeasibility& i) {
  auto num = [](double v) -> json {
    if (!std::isfinite(v)) return nullptr;
    return v;
  };
  return {{"model", i.name},       {"sla", i.sla_key},
          {"limit", num(i.limit)}, {"best", num(i.best)},
          {"alone", i.alone},      {"cause", i.cause},
          {"reason", i.message()}};
}

json learning_state_json(const ModelLearningState& s) {
  return {{"prediction_error", s.last_error},
          {"abs_error", s.abs_error},
          {"margin", s.margin},
          {"z", s.z},
          {"noise_sd", s.noise_sd},
          {"shared_error", s.shared_error},
          {"observations", s.observations},
          {"misses", s.misses}};
}

std::optional<Decision> decision_in_force(const json& record, const ModelRegistry& registry) {
  Decision stored;
  stored.id = json_number_or(record, "id", std::int64_t{0});
  stored.decision = json_number_or(record, "decision", stored.id);
  stored.reason = record.value("reason", std::string());
  const json& ms = record.contains("models") ? record["models"] : json::object();
  if (!ms.is_object() || ms.size() != registry.size() || registry.empty()) return std::nullopt;
  for (const auto& r : registry.entries()) {
    if (!ms.contains(r.name)) return std::nullopt;
    const json& m = ms[r.name];
    const auto l = json_number_or(m, "index", std::int32_t{kAbsent});
    const bool in_range =
        l == kAbsent || (l >= 0 && static_cast<std::size_t>(l) < r.model.local_config_count());
    if (!in_range) return std::nullopt;
    stored.config.push_back(l);
    stored.predicted.push_back(m.contains("predicted") ? predicted_or_zero(m["predicted"])
                                                       : Predicted{});
    stored.base.push_back(m.contains("base") ? predicted_or_zero(m["base"])
                                             : stored.predicted.back());
    stored.margins.push_back(m.contains("margin") ? margin_from_json(m["margin"]) : Margin{});
    stored.best_effort.push_back(m.value("best_effort", false));
    stored.admitted.push_back(std::clamp(json_number_or(m, "admitted", 1.0), 0.0, 1.0));
  }
  if (std::all_of(stored.admitted.begin(), stored.admitted.end(),
                  [](double a) { return a >= 1; })) {
    stored.admitted.clear();
  }
  return stored;
}

std::string plan_body(const json& record) {
  return record.dump(-1, ' ', true, json::error_handler_t::replace) + "\n";
}

}  // namespace corun::serve

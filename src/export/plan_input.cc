// Reading the three plan files corun writes (corun plan --json, a run's report.json, a served
// plan) into one PlanInput resolved against its workload. Every error names the plan file,
// the JSON field and the reason, so that a user can tell a typo from a plan for another
// workload.

#include "corun/export/plan_input.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>
#include <utility>

#include "corun/core/atomic_file.h"
#include "corun/core/strings.h"
#include "corun/core/yaml_json.h"

namespace corun::exporting {
namespace {

using nlohmann::json;

Error bad(const std::string& file, const std::string& field, const std::string& reason) {
  return Error(file + ": " + (field.empty() ? std::string() : field + ": ") + reason);
}

std::string json_type(const json& j) { return j.type_name(); }

// One model of the plan as the file states it, before it meets the workload.
struct RawModel {
  std::string name;
  std::string settings;  // "knob=value,..." as ModelSpec::describe writes it
  std::string field;     // JSON path of the entry, for errors
  double admitted = 1;   // the share of its demand the plan admits
};

struct RawPlan {
  PlanKind kind = PlanKind::kPlanJson;
  std::string label;
  std::string workload;       // empty: the plan does not name it
  std::string workload_hash;  // empty: not stated
  std::string device;         // empty: not stated
  double t_s = 0;             // when the plan was in force (run reports)
  std::vector<RawModel> models;
  // Plans from `corun plan --json` and `corun serve` list every model of their workload, the
  // ones they do not run included; a run's interval lists only the running ones.
  bool lists_every_model = false;
  std::vector<std::string> mentioned;  // every model name the plan lists
  // A run report's interval states the admitted shares per workload model, by position.
  std::vector<double> admitted_by_model;
};

// An admitted share as a plan states it: a number in [0, 1].
Result<double> admitted_member(const json& obj, const std::string& field, const std::string& file) {
  if (obj.is_null()) return 1.0;
  if (!obj.is_number())
    return bad(file, field, "expected a number in [0, 1], got " + json_type(obj));
  const double v = obj.get<double>();
  if (!(v >= 0 && v <= 1))
    return bad(file, field, "expected a number in [0, 1], got " + obj.dump());
  return v;
}

// A string member `key` of `obj`, required or optional; `path` is obj's JSON path.
Result<std::string> string_member(const json& obj, const std::string& key, const std::string& path,
                                  const std::string& file, bool required) {
  const std::string field = path.empty() ? key : path + "." + key;
  const auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) {
    if (required) return bad(file, field, "missing required field");
    return std::string();
  }
  if (!it->is_string()) return bad(file, field, "expected a string, got " + json_type(*it));
  return it->get<std::string>();
}

// The knob text of a served plan's `config` object, for a plan without `settings`.
Result<std::string> settings_from_config(const json& config, const std::string& field,
                                         const std::string& file) {
  if (!config.is_object()) {
    return bad(file, field, "expected an object of knob values, got " + json_type(config));
  }
  std::vector<std::string> parts;
  for (const auto& [k, v] : config.items()) {
    if (v.is_string()) {
      parts.push_back(k + "=" + v.get<std::string>());
    } else if (v.is_number()) {
      parts.push_back(k + "=" + format_number(v.get<double>()));
    } else {
      return bad(file, field + "." + k, "expected a number or a name, got " + json_type(v));
    }
  }
  return join(parts, ",");
}

Result<RawPlan> read_plan_json(const json& j, const std::string& file) {
  RawPlan p;
  p.kind = PlanKind::kPlanJson;
  p.lists_every_model = true;
  auto w = string_member(j, "workload", "", file, false);
  if (!w) return w.error();
  p.workload = *w;
  auto d = string_member(j, "device", "", file, false);
  if (!d) return d.error();
  p.device = *d;
  auto solver = string_member(j, "solver", "", file, false);
  if (!solver) return solver.error();
  p.label = "corun plan --json" + (solver->empty() ? std::string() : " (solver " + *solver + ")");
  const json& models = j["models"];
  for (std::size_t i = 0; i < models.size(); ++i) {
    const std::string path = "models[" + std::to_string(i) + "]";
    if (!models[i].is_object()) return bad(file, path, "expected an object");
    auto name = string_member(models[i], "name", path, file, true);
    if (!name) return name.error();
    p.mentioned.push_back(*name);
    auto config = string_member(models[i], "config", path, file, false);
    if (!config) return config.error();
    // A null config is a model the plan does not run (inactive at the decision).
    if (models[i].contains("config") && models[i]["config"].is_null()) continue;
    if (!models[i].contains("config")) return bad(file, path + ".config", "missing required field");
    p.models.push_back({*name, *config, path + ".config", 1.0});
  }
  return p;
}

Result<RawPlan> read_run_report(const json& j, const std::string& file) {
  RawPlan p;
  p.kind = PlanKind::kRunReport;
  if (j.contains("schema_version")) {
    // Version 2 added the online-learning fields; the plan's shape is the same in both.
    const int v = j["schema_version"].is_number_integer() ? j["schema_version"].get<int>() : 0;
    if (v != 1 && v != 2) {
      return bad(
          file, "schema_version",
          "version " + j["schema_version"].dump() + " is not supported (this corun reads 1 and 2)");
    }
  }
  auto w = string_member(j, "workload", "", file, true);
  if (!w) return w.error();
  p.workload = *w;
  auto h = string_member(j, "workload_hash", "", file, false);
  if (!h) return h.error();
  p.workload_hash = *h;
  auto d = string_member(j, "device", "", file, false);
  if (!d) return d.error();
  p.device = *d;
  const json& intervals = j["intervals"];
  if (intervals.empty())
    return bad(file, "intervals", "the run has no interval: no plan to export");
  // The plan in force at the end of the run is the one of its last interval.
  const std::size_t last = intervals.size() - 1;
  const std::string path = "intervals[" + std::to_string(last) + "]";
  const json& iv = intervals[last];
  if (!iv.is_object()) return bad(file, path, "expected an object, got " + json_type(iv));
  if (!iv.contains("t_s") || !iv["t_s"].is_number()) {
    return bad(file, path + ".t_s", "missing or not a number");
  }
  p.t_s = iv["t_s"].get<double>();
  p.label = "run report, plan in force at t=" + format_number(p.t_s) + " s (last interval)";
  if (!iv.contains("models") || !iv["models"].is_array()) {
    return bad(file, path + ".models", "missing or not a list");
  }
  const json& models = iv["models"];
  for (std::size_t i = 0; i < models.size(); ++i) {
    const std::string mp = path + ".models[" + std::to_string(i) + "]";
    if (!models[i].is_object()) return bad(file, mp, "expected an object");
    auto name = string_member(models[i], "name", mp, file, true);
    if (!name) return name.error();
    auto config = string_member(models[i], "config", mp, file, true);
    if (!config) return config.error();
    p.models.push_back({*name, *config, mp + ".config", 1.0});
  }
  if (iv.contains("admitted")) {
    const json& a = iv["admitted"];
    if (!a.is_array()) return bad(file, path + ".admitted", "expected a list of shares");
    for (std::size_t i = 0; i < a.size(); ++i) {
      auto share = admitted_member(a[i], path + ".admitted[" + std::to_string(i) + "]", file);
      if (!share) return share.error();
      p.admitted_by_model.push_back(*share);
    }
  }
  return p;
}

Result<RawPlan> read_served_plan(const json& j, const std::string& file) {
  RawPlan p;
  p.kind = PlanKind::kServedPlan;
  p.lists_every_model = true;
  auto d = string_member(j, "device", "", file, false);
  if (!d) return d.error();
  p.device = *d;
  auto reason = string_member(j, "reason", "", file, false);
  if (!reason) return reason.error();
  if (!j["id"].is_number_integer()) return bad(file, "id", "expected an integer plan id");
  p.label = "served plan " + j["id"].dump() +
            (reason->empty() ? std::string() : " (reason: " + *reason + ")");
  for (const auto& [name, e] : j["models"].items()) {
    const std::string path = "models." + name;
    if (!e.is_object()) return bad(file, path, "expected an object, got " + json_type(e));
    p.mentioned.push_back(name);
    // A model the planner could not place has index -1 and no settings: it does not run.
    if (e.contains("index") && e["index"].is_number_integer() && e["index"].get<long long>() < 0) {
      continue;
    }
    auto settings = string_member(e, "settings", path, file, false);
    if (!settings) return settings.error();
    if (e.contains("settings")) {
      p.models.push_back({name, *settings, path + ".settings", 1.0});
    } else if (e.contains("config")) {
      auto text = settings_from_config(e["config"], path + ".config", file);
      if (!text) return text.error();
      p.models.push_back({name, *text, path + ".config", 1.0});
    } else {
      return bad(file, path, "neither settings nor config: the model's knob values are missing");
    }
    if (e.contains("admitted")) {
      auto share = admitted_member(e["admitted"], path + ".admitted", file);
      if (!share) return share.error();
      p.models.back().admitted = *share;
    }
  }
  return p;
}

// Which of the three files `j` is, from the members only that kind has.
Result<RawPlan> read_raw_plan(const json& j, const std::string& file) {
  if (!j.is_object()) {
    return bad(file, "", "expected a JSON object (a corun plan), got " + json_type(j));
  }
  if (j.contains("intervals")) {
    if (!j["intervals"].is_array()) return bad(file, "intervals", "expected a list");
    return read_run_report(j, file);
  }
  if (j.contains("models") && j["models"].is_array()) return read_plan_json(j, file);
  if (j.contains("models") && j["models"].is_object() && j.contains("id")) {
    return read_served_plan(j, file);
  }
  return bad(file, j.contains("models") ? "models" : "",
             "not a corun plan: expected `corun plan --json` output (a `models` list), a "
             "`corun run` report.json (`intervals`) or a served plan (`id` and a `models` map)");
}

// "imgsz=480,skip_rate=0.33" -> {{"imgsz", "480"}, {"skip_rate", "0.33"}}.
Result<std::vector<std::pair<std::string, std::string>>> parse_settings_text(
    const std::string& text, const std::string& field, const std::string& file) {
  std::vector<std::pair<std::string, std::string>> out;
  if (text.empty()) return out;
  std::set<std::string> seen;
  for (const auto& part : split(text, ',')) {
    const auto eq = part.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == part.size()) {
      return bad(file, field, "'" + part + "' is not knob=value");
    }
    std::string knob = part.substr(0, eq);
    if (!seen.insert(knob).second) return bad(file, field, "knob '" + knob + "' given twice");
    out.emplace_back(std::move(knob), part.substr(eq + 1));
  }
  return out;
}

// Demand and context events of the run's timeline up to `t_s`: the demand the plan in force
// at `t_s` was made for (an event at t applies from the interval that starts at t).
void apply_timeline_until(Workload& w, double t_s) {
  for (const auto& e : w.timeline.events) {
    if (e.at_s > t_s + 1e-9) break;
    if (e.kind == TimelineEvent::Kind::kDemand || e.kind == TimelineEvent::Kind::kContext) {
      w.models[e.model].demand = e.demand;
    }
  }
}

}  // namespace

std::string_view to_string(PlanKind k) {
  switch (k) {
    case PlanKind::kPlanJson:
      return "corun plan --json";
    case PlanKind::kRunReport:
      return "run report";
    case PlanKind::kServedPlan:
      return "served plan";
  }
  return "plan";
}

Result<PlanInput> parse_plan_input(std::string_view text, const std::string& plan_file,
                                   const std::string& workload_override, const Catalog& catalog) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::parse_error& e) {
    return bad(plan_file, "", std::string("malformed JSON: ") + e.what());
  }
  auto raw = read_raw_plan(j, plan_file);
  if (!raw) return raw.error();

  // The workload: the flag, else the file the plan names ("<serve>" and "<string>" are the
  // names of workloads that exist only in memory).
  std::string workload_file = workload_override;
  if (workload_file.empty()) {
    if (raw->workload.empty() || raw->workload.front() == '<') {
      return bad(plan_file, "workload",
                 "a " + std::string(to_string(raw->kind)) +
                     " does not name its workload file; pass --workload FILE");
    }
    workload_file = raw->workload;
  }
  auto w = load_workload(workload_file, catalog);
  if (!w) {
    return w.error().wrap(plan_file + ": workload '" + workload_file + "'" +
                          (workload_override.empty() ? " (named by the plan; relative paths are "
                                                       "read from the current directory, or pass "
                                                       "--workload FILE)"
                                                     : ""));
  }
  const std::string another = ": a plan for another workload?";
  if (!raw->device.empty() && raw->device != w->device.name &&
      raw->device != w->device.display_name) {
    return bad(plan_file, "device",
               "the plan is for device '" + raw->device + "', " + workload_file + " runs on '" +
                   w->device.name + "'" + another);
  }
  if (!raw->workload_hash.empty() && raw->workload_hash != w->hash) {
    return bad(plan_file, "workload_hash",
               "the plan was made for a workload whose text hashes to " + raw->workload_hash +
                   ", " + workload_file + " hashes to " + w->hash + another +
                   " (or the file changed since the run)");
  }
  if (raw->kind == PlanKind::kRunReport) apply_timeline_until(*w, raw->t_s);

  PlanInput out;
  out.plan_file = plan_file;
  out.kind = raw->kind;
  out.label = raw->label;
  std::set<std::size_t> seen;
  for (const RawModel& rm : raw->models) {
    const auto m = w->find_model(rm.name);
    if (!m) {
      std::vector<std::string> names;
      for (const auto& s : w->models) names.push_back(s.name);
      return bad(plan_file, rm.field.substr(0, rm.field.rfind('.')),
                 "model '" + rm.name + "' is not in " + workload_file +
                     did_you_mean(rm.name, names) + another);
    }
    if (!seen.insert(*m).second) {
      return bad(plan_file, rm.field, "model '" + rm.name + "' appears twice");
    }
    const ModelSpec& spec = w->models[*m];
    auto assignments = parse_settings_text(rm.settings, rm.field, plan_file);
    if (!assignments) return assignments.error();
    // Every searched knob must be named: a plan that leaves one out was made for a workload
    // that does not search it.
    std::vector<std::string> missing;
    for (const auto& k : spec.knobs) {
      const std::string& name = knob_decl(k.id).name;
      const bool named = std::any_of(assignments->begin(), assignments->end(),
                                     [&](const auto& a) { return a.first == name; });
      if (!named) missing.push_back(name);
    }
    if (!missing.empty()) {
      return bad(plan_file, rm.field,
                 "'" + rm.settings + "' does not set " + join(missing, ", ") + ", which " +
                     workload_file + " searches for model '" + rm.name + "'" + another);
    }
    auto index = spec.find_config(*assignments);
    if (!index) {
      return bad(plan_file, rm.field, index.error().message() + " in " + workload_file + another);
    }
    double admitted = rm.admitted;
    if (*m < raw->admitted_by_model.size()) admitted = raw->admitted_by_model[*m];
    out.models.push_back({*m, *index, spec.settings(*index), admitted});
  }
  if (raw->lists_every_model) {
    for (const auto& m : w->models) {
      if (std::find(raw->mentioned.begin(), raw->mentioned.end(), m.name) == raw->mentioned.end()) {
        return bad(plan_file, "models",
                   "model '" + m.name + "' of " + workload_file + " is not in the plan" + another);
      }
    }
  }
  if (out.models.empty())
    return bad(plan_file, "models", "the plan runs no model: nothing to export");
  std::sort(out.models.begin(), out.models.end(),
            [](const PlannedModel& a, const PlannedModel& b) { return a.model < b.model; });
  // The file parsed as a workload above: its entries read as YAML again, as the user wrote them.
  try {
    for (const auto& e : YAML::LoadFile(workload_file)["models"]) {
      if (e["name"] && e["name"].IsScalar()) out.entries[e["name"].Scalar()] = yaml_to_json(e);
    }
  } catch (const YAML::Exception& e) {
    return Error(workload_file + ": " + e.what(), Error::Kind::kInvalidInput);
  }
  out.workload = std::move(*w);
  return out;
}

Result<PlanInput> load_plan_input(const std::filesystem::path& plan_file,
                                  const std::string& workload_override, const Catalog& catalog) {
  auto text = read_file(plan_file);
  if (!text) return text.error();
  return parse_plan_input(*text, plan_file.string(), workload_override, catalog);
}

}  // namespace corun::exporting

// corun export --from OLD --to NEW: only what changes between two plans of one workload, with
// the transition (space/transition.h: per model the action, order, downtime, make-before-break
// or break, VRAM peak) and, per step, the change as the stack applies it.

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "corun/core/strings.h"
#include "render.h"

namespace corun::exporting {
namespace {

bool same_settings(const Settings& a, const Settings& b) {
  for (const auto& d : knob_decls()) {
    if (a.get(d.id) != b.get(d.id)) return false;
  }
  return true;
}

// The local configuration of `spec` whose settings are `s`, or nullopt.
std::optional<std::int32_t> local_of(const ModelSpec& spec, const Settings& s) {
  for (std::size_t l = 0; l < spec.local_config_count(); ++l) {
    if (same_settings(spec.settings(l), s)) return static_cast<std::int32_t>(l);
  }
  return std::nullopt;
}

const ModelDeployment* find(const std::vector<ModelDeployment>& ds, const std::string& name) {
  for (const auto& d : ds) {
    if (d.spec->name == name) return &d;
  }
  return nullptr;
}

nlohmann::json env_object(const std::vector<std::pair<std::string, std::string>>& vars) {
  nlohmann::json env = nlohmann::json::object();
  for (const auto& [k, v] : vars) env[k] = v;
  return env;
}

// The MPS client a model runs in: its own vLLM process, or the GPU's one Triton server.
struct MpsClient {
  nlohmann::json env;
  std::int64_t mem_limit_mib = 0;
};

MpsClient mps_client(const ModelDeployment& d, const std::vector<ModelDeployment>& all,
                     const ExportOptions& options) {
  if (d.server == Server::kVllm) {
    return {env_object(mps_environment(d, options)), d.mps_mem_limit_mib};
  }
  const TritonServer t = triton_server(all);
  return {env_object(mps_environment(t, options)), t.mps_mem_limit_mib};
}

Result<nlohmann::json> vllm_argv(const ModelDeployment& d) {
  auto launch = vllm_launch(d, d.port);
  if (!launch) return launch.error();
  nlohmann::json argv = {"vllm", "serve", launch->model_id};
  for (const auto& a : launch->args) argv.push_back(a);
  return argv;
}

// How the stack applies one model's step (docs/export.md, "From one plan to the next").
Result<nlohmann::json> apply_step(const TransitionStep& step, const ModelDeployment* before,
                                  const ModelDeployment* after,
                                  const std::vector<ModelDeployment>& all_before,
                                  const std::vector<ModelDeployment>& all_after,
                                  const ExportOptions& options) {
  const ModelDeployment* any = after != nullptr ? after : before;
  nlohmann::json a = nlohmann::json::object();
  if (any == nullptr) return a;
  if (any->server == Server::kVllm) {
    // vLLM fixes its engine arguments at start: a change is a new `vllm serve` process.
    a["server"] = "vllm";
    if (before != nullptr) {
      auto argv = vllm_argv(*before);
      if (!argv) return argv.error();
      a["before"] = {{"argv", *argv}};
    }
    if (after != nullptr) {
      auto argv = vllm_argv(*after);
      if (!argv) return argv.error();
      a["after"] = {{"argv", *argv}};
    }
  } else {
    // Triton's model repository extension: POST v2/repository/models/NAME/load with the new
    // ModelConfig as the "config" parameter (a JSON string) reloads the model; an
    // instance_group count change is applied in place by the same call. A model the plan stops
    // is unloaded.
    a["server"] = "triton";
    const std::string path = "/v2/repository/models/" + step.name;
    if (after != nullptr) {
      a["request"] = {
          {"method", "POST"},
          {"path", path + "/load"},
          {"body", {{"parameters", {{"config", triton_config_json(*after).dump()}}}}}};
    } else {
      a["request"] = {{"method", "POST"}, {"path", path + "/unload"}};
    }
  }
  // MPS limits are read when a client's CUDA context is created: a process that starts (a
  // restart, a model that arrives) takes the new environment; a reload or a live change keeps
  // the one its process started with, which must still hold the new configuration's memory.
  // A Triton model's process is the GPU's Triton server: its limits are the server's.
  if (after == nullptr) return a;
  const MpsClient client_after = mps_client(*after, all_after, options);
  const bool starts = before == nullptr || step.change.action == Actuation::kRestart;
  if (starts) {
    const nlohmann::json env_before =
        before != nullptr ? mps_client(*before, all_before, options).env : nlohmann::json();
    if (env_before != client_after.env) {
      a["mps_env"] = {{"before", env_before}, {"after", client_after.env}};
    }
  } else if (const MpsClient client_before = mps_client(*before, all_before, options);
             client_after.mem_limit_mib > client_before.mem_limit_mib) {
    a["mps_env"] = {{"before", client_before.env}, {"after", client_after.env}};
    a["warning"] = "the new configuration needs " + std::to_string(client_after.mem_limit_mib) +
                   " MiB, above the MPS memory limit of " +
                   std::to_string(client_before.mem_limit_mib) +
                   " MiB its server process started with: restart it with mps_env.after";
  }
  return a;
}

bool serves(Server s, ExportFormat f) {
  switch (f) {
    case ExportFormat::kVllm:
      return s == Server::kVllm;
    case ExportFormat::kTriton:
      return s == Server::kTriton;
    case ExportFormat::kMps:
    case ExportFormat::kCompose:
    case ExportFormat::kK8s:
      return true;
  }
  return false;
}

// What the diff's steps share: both plans, the export asked for, and each plan's deployment.
struct DiffContext {
  const PlanInput& from;
  const PlanInput& to;
  ExportFormat format;
  const ExportOptions& options;
  const std::vector<ModelDeployment>& deploy_from;
  const std::vector<ModelDeployment>& deploy_to;
};

// The old plan's configuration in the numbering of the new plan's workload; an error when the
// two plans are not of one workload.
Result<JointConfig> renumber_old_plan(const PlanInput& from, const PlanInput& to) {
  const Workload& w = to.workload;
  JointConfig from_cfg(w.models.size(), kAbsent);
  for (const auto& p : from.models) {
    const std::string& name = from.spec(p).name;
    std::optional<std::size_t> m;
    for (std::size_t k = 0; k < w.models.size(); ++k) {
      if (w.models[k].name == name) m = k;
    }
    if (!m) {
      return Error(from.plan_file + ": models." + name + ": no model '" + name + "' in " + w.file +
                   ", the workload of " + to.plan_file + "; both plans must be of one workload");
    }
    const auto l = local_of(w.models[*m], p.settings);
    if (!l) {
      return Error(from.plan_file + ": models." + name + ": its configuration (" +
                   from.spec(p).describe(p.local_index) + ") is not one of " + w.file +
                   "'s for it; both plans must be of one workload");
    }
    from_cfg[*m] = *l;
  }
  return from_cfg;
}

// The new plan's deployments of the models that start or change and that `format` serves.
std::vector<ModelDeployment> changed_deployments(const JointTransition& jt,
                                                 const std::vector<ModelDeployment>& deploy_to,
                                                 ExportFormat format) {
  std::vector<ModelDeployment> changed;
  for (const auto& step : jt.steps) {
    if (step.to == kAbsent) continue;
    if (const auto* d = find(deploy_to, step.name); d != nullptr && serves(d->server, format)) {
      changed.push_back(*d);
    }
  }
  return changed;
}

// The files of a compose file or Kubernetes manifests that a changed model touches: the whole
// file, and of the Triton repository it mounts, only the changed models.
std::vector<ExportFile> whole_files_changed(std::vector<ExportFile>& full,
                                            const std::vector<ModelDeployment>& changed) {
  std::vector<ExportFile> files;
  for (auto& f : full) {
    const bool repo = f.path.rfind("triton/", 0) == 0;
    const bool keep = !repo || std::any_of(changed.begin(), changed.end(), [&](const auto& d) {
      // build_engine.sh builds the changed engines again.
      return f.path.rfind("triton/" + d.spec->name + "/", 0) == 0 ||
             (f.path == "triton/build_engine.sh" && d.server == Server::kTriton);
    });
    if (keep) files.push_back(std::move(f));
  }
  return files;
}

// One env file per vLLM process that restarts, and the Triton server's when its limits change
// (they are the sum over all its models, not only the changed ones).
std::vector<ExportFile> mps_files_changed(const DiffContext& c, std::vector<ExportFile>& full,
                                          const std::vector<ModelDeployment>& changed) {
  std::vector<ExportFile> files;
  const bool triton_env_changed =
      env_object(mps_environment(triton_server(c.deploy_to), c.options)) !=
      env_object(mps_environment(triton_server(c.deploy_from), c.options));
  for (auto& f : full) {
    const bool keep = (f.path == "triton.env" && triton_env_changed) ||
                      std::any_of(changed.begin(), changed.end(), [&](const ModelDeployment& d) {
                        return d.server == Server::kVllm && f.path == d.spec->name + ".env";
                      });
    if (keep) files.push_back(std::move(f));
  }
  return files;
}

// The files of a per-server format (vLLM, Triton, MPS) of the changed models only.
Result<std::vector<ExportFile>> render_changed(const DiffContext& c, std::vector<ExportFile>& full,
                                               const std::vector<ModelDeployment>& changed) {
  Result<std::vector<ExportFile>> r = Error("unreachable", Error::Kind::kInternal);
  switch (c.format) {
    case ExportFormat::kVllm:
      r = render_vllm(c.to, changed, c.options);
      break;
    case ExportFormat::kTriton:
      r = render_triton(c.to, changed, c.options);
      break;
    case ExportFormat::kMps:
      r = mps_files_changed(c, full, changed);
      break;
    case ExportFormat::kCompose:
    case ExportFormat::kK8s:
      break;
  }
  return r;
}

// The transition as JSON, each step with how the stack applies it.
Result<nlohmann::json> transition_json(const DiffContext& c, const JointTransition& jt) {
  nlohmann::json t = to_json(jt);
  for (std::size_t i = 0; i < jt.steps.size(); ++i) {
    const TransitionStep& step = jt.steps[i];
    auto a = apply_step(step, step.from != kAbsent ? find(c.deploy_from, step.name) : nullptr,
                        step.to != kAbsent ? find(c.deploy_to, step.name) : nullptr, c.deploy_from,
                        c.deploy_to, c.options);
    if (!a) return a.error().wrap(step.to != kAbsent ? c.to.plan_file : c.from.plan_file);
    t["steps"][i]["apply"] = std::move(*a);
  }
  return t;
}

}  // namespace

Result<std::vector<ExportFile>> render_export_diff(const PlanInput& from, const PlanInput& to,
                                                   ExportFormat format,
                                                   const ExportOptions& options,
                                                   const ActuationTable& table) {
  const Workload& w = to.workload;
  if (from.workload.device.name != w.device.name) {
    return Error(from.plan_file + ": device: " + from.workload.device.name + ", but " +
                 to.plan_file + " is for " + w.device.name +
                 "; both plans must be of one workload");
  }
  // Both plans in the numbering of the new plan's workload.
  JointConfig to_cfg(w.models.size(), kAbsent);
  for (const auto& p : to.models) to_cfg[p.model] = static_cast<std::int32_t>(p.local_index);
  auto from_cfg = renumber_old_plan(from, to);
  if (!from_cfg) return from_cfg.error();

  // The format's files, of the models that start or change only. Rendered over the whole new
  // plan first: a plan the format cannot express fails as a full export would, and ports stay
  // those of the full export.
  const auto deploy_to = plan_deployment(to, options);
  const auto deploy_from = plan_deployment(from, options);
  auto full = render_export(to, format, options);
  if (!full) return full.error().wrap(to.plan_file);
  const DiffContext c{from, to, format, options, deploy_from, deploy_to};

  const JointTransition jt = joint_transition(table, w, *from_cfg, to_cfg);
  const std::vector<ModelDeployment> changed = changed_deployments(jt, deploy_to, format);
  std::vector<ExportFile> files;
  if (format == ExportFormat::kCompose || format == ExportFormat::kK8s) {
    // `docker compose up -d` recreates only the services whose definition changed, `kubectl
    // apply` only the Deployments whose pod template changed: the whole file is the diff's
    // unit. Of the Triton repository it mounts, only the changed models.
    if (!jt.empty()) files = whole_files_changed(*full, changed);
  } else if (!changed.empty()) {
    auto r = render_changed(c, *full, changed);
    if (!r) return r.error().wrap(to.plan_file);
    files = std::move(*r);
  }

  auto t = transition_json(c, jt);
  if (!t) return t.error();
  nlohmann::json written = nlohmann::json::array();
  for (const auto& f : files) written.push_back(f.path);
  const nlohmann::json doc = {
      {"from", {{"plan", from.plan_file}, {"label", from.label}}},
      {"to", {{"plan", to.plan_file}, {"label", to.label}}},
      {"workload", w.file},
      {"format", to_string(format)},
      {"files", written},
      {"generator", options.generator},
      {"transition", *t}};
  files.push_back({"transition.json", doc.dump(2) + "\n"});
  return files;
}

}  // namespace corun::exporting

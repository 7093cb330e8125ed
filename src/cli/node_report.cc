#include "node_report.h"

#include "common.h"
#include "corun/runtime/surrogate_source.h"
#include "corun/runtime/testbed_predictor.h"
#include "corun/runtime/twin_source.h"

namespace corun::cli {

nlohmann::json predicted_json(const ModelSpec& m, const Predicted& p) {
  if (m.arch.family == ModelFamily::kLlm) {
    return {{"ttft_ms_p95", p.ttft_ms_p95},
            {"tpot_ms_p95", p.tpot_ms_p95},
            {"throughput", p.throughput}};
  }
  return {{"latency_ms_p95", p.latency_ms_p95}, {"throughput", p.throughput}};
}

std::string predicted_headline(const ModelSpec& m, const Predicted& p) {
  if (m.arch.family == ModelFamily::kLlm) {
    return "ttft " + fixed(p.ttft_ms_p95, 0) + " tpot " + fixed(p.tpot_ms_p95, 1);
  }
  return "p95 " + fixed(p.latency_ms_p95, 1);
}

namespace {

Result<NodeSources> make_node_sources(const Context& ctx, const Workload& w,
                                      const std::string& surrogate_file, const std::string& testbed,
                                      double window_s) {
  NodeSources out;
  out.slices = std::make_unique<TwinSource>(TwinOptions{0.1, window_s});
  if (surrogate_file.empty()) {
    out.whole = std::make_unique<TwinSource>(TwinOptions{0.1, window_s});
    out.describe = "twin (catalog simulator)";
    return out;
  }
  auto s = surrogate::Surrogate::load(surrogate_file);
  if (!s) return s.error();
  if (auto st = s->check_workload(w); !st.ok()) {
    return st.error().wrap(surrogate_file + " does not fit " + w.file);
  }
  auto t = make_testbed(testbed);
  if (!t) return t.error();
  out.reprofile = std::move(*t);
  out.whole = std::make_unique<SurrogateSource>(ctx, std::move(*s), *out.reprofile,
                                                SurrogateSourceOptions{3, window_s});
  out.describe = out.whole->describe() + " (whole GPUs), twin (MIG slices)";
  return out;
}

}  // namespace

void add_node_search_flags(CLI::App& sub, PlanFlags& f) {
  sub.add_option("--node-screen", f.screen,
                 "node workloads: the cheap per-GPU solver that prices the search's candidate "
                 "placements before the best few and the baseline starts are planned with "
                 "--solver (greedy, hillclimb; none = --solver throughout)")
      ->check(CLI::IsMember({"greedy", "hillclimb", "none"}))
      ->capture_default_str();
}

void add_measure_flags(CLI::App& sub, PlanFlags& f) {
  sub.add_option("--testbed", f.testbed, testbed_help())->capture_default_str();
  sub.add_option("--window", f.window_s, "measurement window in seconds")
      ->check(CLI::Range(0.1, 3600.0))
      ->capture_default_str();
  sub.add_option("--catalog", f.catalog, kCatalogFlagHelp);
  sub.add_flag("--json", f.json, "print JSON");
}

Result<std::unique_ptr<NodeSession>> make_node_session(const Context& ctx, const Workload& w,
                                                       const PlanFlags& flags,
                                                       UnitPlanCache* shared) {
  auto session = std::make_unique<NodeSession>();
  auto sources = make_node_sources(ctx, w, flags.model, flags.testbed, flags.window_s);
  if (!sources) return sources.error();
  session->sources = std::move(*sources);
  auto solver = make_solver(flags.solver);
  if (!solver) return solver.error();
  session->solver = std::move(*solver);
  session->models = std::make_unique<SourceUnitModels>(w, *session->sources.whole,
                                                       *session->sources.slices);
  NodePlanOptions options;
  options.screen = flags.screen == "none" ? std::string() : flags.screen;
  session->planner =
      std::make_unique<NodePlanner>(ctx, w, *session->models, *session->solver, options, shared);
  return session;
}

namespace {

std::string unit_label(const NodePlan& plan, std::size_t m) {
  const auto u = plan.assignment[m];
  return u == kNotPlaced ? "-" : plan.layout.units[static_cast<std::size_t>(u)].label();
}

}  // namespace

ModelsByUnit models_by_unit(const Workload& w, const NodePlan& plan) {
  ModelsByUnit out;
  out.on.resize(plan.layout.units.size());
  for (std::size_t m = 0; m < w.models.size(); ++m) {
    const auto u = plan.assignment[m];
    if (u == kNotPlaced) {
      out.unplaced.push_back(w.models[m].name);
    } else {
      out.on[static_cast<std::size_t>(u)].push_back(m);
    }
  }
  return out;
}

nlohmann::json node_plan_json(const Workload& w, const NodePlan& plan,
                              const NodeOutcome* measured) {
  nlohmann::json models = nlohmann::json::array();
  for (std::size_t m = 0; m < w.models.size(); ++m) {
    const ModelSpec& spec = w.models[m];
    nlohmann::json jm = {{"name", spec.name}, {"active", spec.active}};
    const auto u = plan.assignment[m];
    if (u == kNotPlaced || plan.config[m] == kAbsent) {
      jm["unit"] = nullptr;
      jm["gpu"] = nullptr;
      jm["config"] = nullptr;
      models.push_back(std::move(jm));
      continue;
    }
    const GpuUnit& unit = plan.layout.units[static_cast<std::size_t>(u)];
    jm["unit"] = unit.label();
    jm["gpu"] = unit.gpu;
    jm["slice"] = unit.profile.empty() ? nlohmann::json(nullptr) : nlohmann::json(unit.profile);
    if (spec.gpu) jm["pinned_gpu"] = *spec.gpu;
    jm["config"] = spec.describe(static_cast<std::size_t>(plan.config[m]));
    jm["local_index"] = plan.config[m];
    jm["predicted"] = predicted_json(spec, plan.predicted[m]);
    if (measured != nullptr) {
      if (const ModelMetrics* mm = measured->measured.find(m)) {
        jm["measured"] = mm->ok() ? predicted_json(spec, as_predicted(*mm))
                                  : nlohmann::json{{"error", mm->error}};
        jm["meets_sla"] = measured_meets_sla(spec, *mm);
      }
    }
    models.push_back(std::move(jm));
  }
  nlohmann::json units = nlohmann::json::array();
  for (const auto& u : plan.layout.units) {
    units.push_back({{"unit", u.label()},
                     {"gpu", u.gpu},
                     {"profile", u.profile},
                     {"sm_count", u.device.sm_count},
                     {"vram_gb", u.device.vram_gb}});
  }
  nlohmann::json out = {{"strategy", plan.strategy},
                        {"layout", plan.layout.describe()},
                        {"units", units},
                        {"placed", plan.placed},
                        {"feasible", plan.feasible},
                        {"predicted_utility", plan.utility},
                        {"models", models},
                        {"search",
                         {{"subplans_solved", plan.subplans},
                          {"subplans_screened", plan.screened},
                          {"cache_hits", plan.cache_hits},
                          {"elapsed_ms", plan.elapsed_ms}}}};
  if (measured != nullptr) {
    out["measured"] = {{"utility", measured->measured_utility},
                       {"sla_violations", measured->violations}};
  }
  return out;
}

std::string node_plan_text(const Workload& w, const NodePlan& plan, const NodeOutcome* measured) {
  Table t({"model", "unit", "config", "predicted", "SLA", measured ? "measured" : "",
           measured ? "status" : ""});
  for (std::size_t m = 0; m < w.models.size(); ++m) {
    const ModelSpec& spec = w.models[m];
    if (plan.assignment[m] == kNotPlaced || plan.config[m] == kAbsent) {
      t.add({spec.name, "-", spec.active ? "(NOT PLACED)" : "(not running)", "-", "-", "", ""});
      continue;
    }
    std::string meas, status;
    if (measured != nullptr) {
      if (const ModelMetrics* mm = measured->measured.find(m)) {
        meas = mm->ok() ? predicted_headline(spec, as_predicted(*mm)) : mm->error;
        status = measured_meets_sla(spec, *mm) ? "ok" : "BREACH";
      }
    }
    t.add({spec.name, unit_label(plan, m), spec.describe(static_cast<std::size_t>(plan.config[m])),
           predicted_headline(spec, plan.predicted[m]), sla_text(spec), meas, status});
  }
  return t.render();
}

}  // namespace corun::cli

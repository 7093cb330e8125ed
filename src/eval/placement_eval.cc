#include "corun/eval/placement_eval.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <iterator>
#include <limits>
#include <thread>

#include "corun/core/rng.h"
#include "corun/mapping/guard.h"

namespace corun::mapping {

Result<Oracle> brute_force_oracle(const PlacementProblem& problem, std::uint64_t max_mappings) {
  const std::uint64_t count = problem.mapping_count();
  if (count > max_mappings) {
    return Error(problem.scenario().name + ": " + std::to_string(count) +
                     " mappings exceed the oracle's limit of " + std::to_string(max_mappings),
                 Error::Kind::kResource);
  }
  Executor ex(problem);
  Oracle o;
  o.makespan_ms = std::numeric_limits<double>::infinity();
  o.mappings = count;
  struct Run {
    double ms;
    std::uint64_t index;
    BurstLoad burst;
  };
  std::vector<Run> runs;
  for (std::uint64_t k = 0; k < count; ++k) {
    const Mapping m = problem.mapping_at(k);
    const double ms = ex.makespan_s(m) * 1e3;
    if (std::isfinite(ms)) runs.push_back({ms, k, ex.last_burst()});
    if (ms < o.makespan_ms) {
      o.makespan_ms = ms;
      o.mapping = m;
    }
  }
  if (!std::isfinite(o.makespan_ms)) {
    return Error(problem.scenario().name + ": every mapping fails");
  }
  const auto& co = problem.corunners();
  if (!co) return o;
  // Ground truth: the testbed's verdict on each burst, fastest mapping first; the first that
  // breaks nothing is the constrained optimum (ties keep the lower mapping index).
  auto testbed = make_testbed(co->testbed);
  if (!testbed) return testbed.error();
  std::stable_sort(runs.begin(), runs.end(),
                   [](const Run& a, const Run& b) { return a.ms < b.ms; });
  o.unconstrained_makespan_ms = o.makespan_ms;
  for (const Run& r : runs) {
    ++o.bursts_measured;
    auto outcomes = co->during(r.burst, **testbed);
    if (!outcomes) return outcomes.error().wrap(problem.scenario().name);
    if (!breaches(*outcomes).empty()) continue;
    o.makespan_ms = r.ms;
    o.mapping = problem.mapping_at(r.index);
    return o;
  }
  return Error(problem.scenario().name +
               ": every mapping breaks a co-running model's SLA (measured on " + co->testbed + ")");
}

double true_makespan_ms(const PlacementProblem& problem, const Mapping& mapping) {
  Executor ex(problem);
  return ex.makespan_s(mapping) * 1e3;
}

nlohmann::json to_json(const PlacementRow& r) {
  nlohmann::json j = {{"scenario", r.scenario},
                      {"kind", r.kind},
                      {"policy", r.policy},
                      {"optimal", r.optimal},
                      {"oracle_makespan_ms", r.oracle_makespan_ms},
                      {"executions", r.executions},
                      {"failed", r.failed},
                      {"mapping", r.mapping}};
  // JSON has no infinity: a failing mapping has no makespan.
  j["makespan_ms"] =
      std::isfinite(r.makespan_ms) ? nlohmann::json(r.makespan_ms) : nlohmann::json(nullptr);
  if (r.predicted_makespan_ms) j["predicted_makespan_ms"] = *r.predicted_makespan_ms;
  if (r.unconstrained_oracle_makespan_ms) {
    j["unconstrained_oracle_makespan_ms"] = *r.unconstrained_oracle_makespan_ms;
  }
  const auto outcomes_json = [](const std::vector<SlaOutcome>& list) {
    nlohmann::json b = nlohmann::json::array();
    for (const SlaOutcome& o : list) b.push_back(to_json(o));
    return b;
  };
  if (r.corunner_breaches) j["corunner_breaches"] = outcomes_json(*r.corunner_breaches);
  if (r.predicted_corunner_breaches) {
    j["predicted_corunner_breaches"] = outcomes_json(*r.predicted_corunner_breaches);
    j["excluded_mappings"] = r.excluded;
  }
  if (!r.error.empty()) j["error"] = r.error;
  return j;
}

Result<std::optional<std::vector<SlaOutcome>>> measure_corunners_during(
    const PlacementProblem& problem, const Mapping& mapping) {
  const auto& co = problem.corunners();
  if (!co) return std::optional<std::vector<SlaOutcome>>();
  auto testbed = make_testbed(co->testbed);
  if (!testbed) return testbed.error();
  Executor ex(problem);
  const RunResult run = ex.run(mapping);
  auto outcomes = co->during(run.burst, **testbed);
  if (!outcomes) return outcomes.error();
  return std::optional<std::vector<SlaOutcome>>(breaches(*outcomes));
}

std::optional<std::vector<SlaOutcome>> predict_corunners_during(const PlacementProblem& problem,
                                                                const Mapping& mapping) {
  const CoRunnerGuard* guard = problem.guard();
  if (guard == nullptr) return std::nullopt;
  Executor ex(problem);
  return predicted_breaches(*guard, ex.run(mapping).burst);
}

PlacementRow judge(const PlacementProblem& problem, const Oracle& oracle, Policy& policy,
                   double tolerance) {
  PlacementRow row;
  row.scenario = problem.scenario().name;
  row.kind = problem.scenario().kind;
  row.policy = std::string(policy.name());
  row.oracle_makespan_ms = oracle.makespan_ms;
  row.unconstrained_oracle_makespan_ms = oracle.unconstrained_makespan_ms;
  Executor ex(problem);
  TrialRunner runner(ex);
  auto d = policy.decide(runner, problem.scenario().context);
  if (!d) {
    row.error = d.error().what();
    row.makespan_ms = std::numeric_limits<double>::infinity();
    row.executions = runner.executions();
    return row;
  }
  row.executions = d->executions;
  row.excluded = d->excluded.size();
  row.mapping = problem.describe(d->mapping);
  row.predicted_makespan_ms = d->predicted_makespan_ms;
  if (const Status s = problem.validate(d->mapping); !s.ok()) {
    row.error = "invalid final mapping: " + s.error().what();
    row.makespan_ms = std::numeric_limits<double>::infinity();
    return row;
  }
  row.makespan_ms = ex.makespan_s(d->mapping) * 1e3;
  row.failed = !std::isfinite(row.makespan_ms);
  row.optimal = !row.failed && row.makespan_ms <= oracle.makespan_ms * (1 + tolerance);
  if (!row.failed) {
    auto measured = measure_corunners_during(problem, d->mapping);
    if (!measured) {
      row.error = measured.error().what();
      row.optimal = false;
    } else {
      row.corunner_breaches = std::move(*measured);
      // Under the co-runner constraint a mapping that breaks one (measured) is never optimal.
      if (row.corunner_breaches && !row.corunner_breaches->empty()) row.optimal = false;
    }
    row.predicted_corunner_breaches = predict_corunners_during(problem, d->mapping);
  }
  return row;
}

Result<std::vector<PlacementRow>> evaluate(const std::vector<PlacementProblem>& problems,
                                           const EvalOptions& options) {
  std::shared_ptr<Agent> agent = options.agent ? options.agent : std::make_shared<BuiltinAgent>();
  for (const auto& name : options.policies) {
    auto p = make_policy(name, agent);
    if (!p) return p.error();
  }
  const std::size_t np = options.policies.size();
  std::vector<PlacementRow> rows(problems.size() * np);
  std::vector<std::string> errors(problems.size());
  std::atomic<std::size_t> next{0};
  auto work = [&] {
    for (std::size_t k = next++; k < problems.size(); k = next++) {
      auto oracle = brute_force_oracle(problems[k]);
      if (!oracle) {
        errors[k] = oracle.error().what();
        continue;
      }
      for (std::size_t q = 0; q < np; ++q) {
        auto policy = make_policy(options.policies[q], agent);
        rows[k * np + q] = judge(problems[k], *oracle, **policy, options.tolerance);
      }
    }
  };
  const int threads = std::max(1, std::min<int>(options.threads, int(problems.size())));
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  for (const auto& e : errors) {
    if (!e.empty()) return Error(e);
  }
  return rows;
}

Scenario generate_scenario(const Context& ctx, const ToolCatalog& tools, const Device& device,
                           const GeneratorOptions& options) {
  Rng rng(derive_seed(ctx.seed, {0x6e6e}));
  Scenario s;
  s.name = "random-" + std::to_string(ctx.seed);
  s.kind = "random";
  s.device = device.name;
  s.context = ctx;
  s.noise = tools.model.default_noise;
  const int span = std::max(0, options.max_tools - options.min_tools);
  const int n = options.min_tools + static_cast<int>(rng.below(std::uint64_t(span) + 1));
  // Half of the scenarios draw only from the tools whose placement is contested: long
  // launch-bound GPU tools (their launch gaps grow with co-runners), the ambiguous ones, and
  // the PCIe-bound vector search. The other half draw from the whole catalog.
  static constexpr const char* kContested[] = {"summarize",  "asr",    "caption",      "translate",
                                               "ocr",        "rerank", "text_embed",   "depth",
                                               "clip_image", "pose",   "vector_search"};
  const bool contested = rng.uniform() < 0.5;
  for (int i = 0; i < n; ++i) {
    const Tool* t = nullptr;
    if (contested) {
      t = tools.find(kContested[rng.below(std::size(kContested))]);
    }
    if (!t) t = &tools.tools[rng.below(tools.tools.size())];
    s.nodes.push_back(ToolNode{"t" + std::to_string(i) + "_" + t->name, t->name, {}, 0});
  }
  const auto shape = rng.below(3);
  if (shape == 0) {
    s.description = "random chain";
    for (int i = 1; i < n; ++i) s.nodes[i].after = {std::size_t(i - 1)};
  } else if (shape == 1) {
    s.description = "random fan-out / fan-in";
    const bool sink = rng.uniform() < 0.5;
    const int last = sink ? n - 1 : n;
    for (int i = 1; i < last; ++i) s.nodes[i].after = {0};
    if (sink) {
      for (int i = 1; i < n - 1; ++i) s.nodes[n - 1].after.push_back(std::size_t(i));
    }
  } else {
    s.description = "random layered DAG";
    for (int i = 1; i < n; ++i) {
      if (rng.uniform() < 0.25) continue;  // another root
      const auto a = rng.below(std::uint64_t(i));
      s.nodes[i].after.push_back(a);
      if (i >= 2 && rng.uniform() < 0.35) {
        const auto b = rng.below(std::uint64_t(i));
        if (b != a) s.nodes[i].after.push_back(b);
      }
    }
  }
  double gpu_sum = 0;
  for (const auto& node : s.nodes) {
    const Tool* t = tools.find(node.tool);
    if (t->has_gpu) gpu_sum += t->vram_bytes() / 1e9;
  }
  if (rng.uniform() < 0.5) {
    s.vram_budget_gb = std::max(1.0, std::ceil(gpu_sum * 1.2 * 10) / 10);
  } else {
    const double f = 0.25 + 0.45 * rng.uniform();
    s.vram_budget_gb = std::max(1.0, std::round(gpu_sum * f * 10) / 10);
    s.description += ", VRAM budget below the summed footprints";
  }
  if (rng.uniform() < 0.3) {
    s.background.gpu_sm_util = std::round((0.1 + 0.3 * rng.uniform()) * 100) / 100;
    s.background.gpu_bw_util = std::round((0.1 + 0.2 * rng.uniform()) * 100) / 100;
    s.description += ", background GPU tenant";
  }
  return s;
}

}  // namespace corun::mapping

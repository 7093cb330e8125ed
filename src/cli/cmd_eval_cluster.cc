// corun eval cluster FILE: a seeded stream of model arrivals and departures over K nodes of G
// GPUs, placed by several schedulers side by side (corun's extender rule, corun's consolidating
// rule, memory bin-packing, spread), optionally under one cluster-wide GPU budget; every changed
// node is measured on the testbed after each event.
#include <algorithm>
#include <cstdio>
#include <memory>

#include "command.h"
#include "common.h"
#include "corun/core/strings.h"
#include "corun/eval/cluster_eval.h"
#include "node_report.h"

namespace corun::cli::cmd_eval_cluster {
namespace {

struct Flags : PlanFlags {
  int nodes = 4;
  int gpus = 8;
  int arrivals = 200;
  double residents = 24;  // mean models in the cluster (lifetime / inter-arrival time)
  std::vector<std::string> schedulers = kClusterSchedulers;  // side by side, in this order
  int gpu_budget = 0;  // GPUs in use cluster-wide, at most (0 = the whole cluster)
};

// The evaluation's options from the flags; each node's planner is a node session built from
// them (make_node_session), kept alive by the planner it hands out.
ClusterEvalOptions options(const Flags& f) {
  ClusterEvalOptions o;
  o.nodes = f.nodes;
  o.gpus = f.gpus;
  o.arrivals = f.arrivals;
  o.residents = f.residents;
  o.schedulers = f.schedulers;
  o.gpu_budget = f.gpu_budget;
  o.window_s = f.window_s;
  o.planner = [&f](const Context& ctx, const Workload& w,
                   UnitPlanCache* shared) -> Result<std::shared_ptr<NodePlanner>> {
    auto s = make_node_session(ctx, w, f, shared);
    if (!s) return s.error();
    std::shared_ptr<NodeSession> session = std::move(*s);
    return std::shared_ptr<NodePlanner>(session, session->planner.get());
  };
  return o;
}

int run(const Flags& f) {
  auto mix = load_workload_file(f.file, f.catalog);
  if (!mix) return report_error(mix.error());
  if (mix->models.empty()) {
    return report_error(Error(f.file + ": models: the arrival mix lists no model templates"));
  }
  if (!mix->node.single_gpu()) {
    return report_error(Error(f.file + ": gpus: an arrival mix describes models, not a node "
                                       "(the cluster's shape comes from --nodes and --gpus)"));
  }
  for (const auto& name : f.schedulers) {
    if (std::find(kClusterSchedulers.begin(), kClusterSchedulers.end(), name) ==
        kClusterSchedulers.end()) {
      return report_error(Error("--schedulers: unknown scheduler '" + name +
                                "' (known: " + join(kClusterSchedulers, ", ") + ")"));
    }
  }
  if (f.schedulers.empty()) return report_error(Error("--schedulers: names no scheduler"));
  auto testbed = make_testbed(f.testbed);
  if (!testbed) return report_error(testbed.error());
  const Context ctx = f.context();
  auto eval = evaluate_cluster(ctx, *mix, **testbed, options(f));
  if (!eval) return report_error(eval.error());

  const double n = static_cast<double>(eval->events);
  if (f.json) {
    nlohmann::json rows = nlohmann::json::array();
    for (const auto& c : eval->runs) {
      const ClusterTotals& t = c.totals;
      rows.push_back({{"scheduler", c.scheduler},
                      {"gpus_used_mean", t.gpu_sum / n},
                      {"gpus_used_max", t.gpu_max},
                      {"sla_violations", t.violations},
                      {"sla_violations_by_template", t.violations_by_template},
                      {"utility_mean", t.utility_sum / n},
                      {"utility_held_mean", t.utility_held_sum / n},
                      {"rejected", t.rejected},
                      {"rejected_by_template", t.rejected_by_template},
                      {"decision_ms_total", t.decision_ms},
                      {"placements", t.placed}});
    }
    nlohmann::json out = {{"mix", mix->file},         {"nodes", f.nodes},
                          {"gpus", f.gpus},           {"arrivals", f.arrivals},
                          {"residents", f.residents}, {"seed", f.seed},
                          {"gpu_budget", f.gpu_budget},
                          {"events", eval->events},   {"schedulers", rows}};
    std::printf("%s\n", out.dump().c_str());
    return kExitOk;
  }
  Table t({"scheduler", "GPUs used (mean)", "GPUs used (max)", "SLA violations (model-intervals)",
           "mean measured utility", "held-SLA utility", "rejected", "decision ms (total)"});
  for (const auto& c : eval->runs) {
    const ClusterTotals& x = c.totals;
    t.add({c.scheduler, fixed(x.gpu_sum / n, 2), std::to_string(x.gpu_max),
           std::to_string(x.violations), fixed(x.utility_sum / n, 3),
           fixed(x.utility_held_sum / n, 3), std::to_string(x.rejected),
           fixed(x.decision_ms, 0)});
  }
  std::printf(
      "corun eval cluster: %s, %d node(s) x %d %s, %d arrivals (mean %.0f resident), %zu "
      "events, seed %llu, testbed %s%s\n%s",
      mix->file.c_str(), f.nodes, f.gpus, mix->device.display_name.c_str(), f.arrivals,
      f.residents, eval->events, static_cast<unsigned long long>(f.seed), f.testbed.c_str(),
      f.gpu_budget > 0 ? (", at most " + std::to_string(f.gpu_budget) + " GPU(s) in use").c_str()
                       : "",
      t.render().c_str());
  return kExitOk;
}

const bool registered = register_command({
    "eval cluster",
    "Replay model arrivals over a cluster: corun's rules vs bin-packing and spread",
    [](CLI::App& sub) {
      auto f = std::make_shared<Flags>();
      sub.add_option("file", f->file, "arrival mix: a workload YAML whose models are templates")
          ->required();
      sub.add_option("--nodes", f->nodes, "nodes in the cluster")
          ->check(CLI::Range(1, 64))
          ->capture_default_str();
      sub.add_option("--gpus", f->gpus, "GPUs per node")
          ->check(CLI::Range(1, 16))
          ->capture_default_str();
      sub.add_option("--arrivals", f->arrivals, "model arrivals in the stream")
          ->check(CLI::Range(1, 100000))
          ->capture_default_str();
      sub.add_option("--residents", f->residents,
                     "mean models in the cluster (mean lifetime in inter-arrival times)")
          ->check(CLI::Range(0.1, 10000.0))
          ->capture_default_str();
      add_seed_flag(sub, f->seed, "the stream, the plans and the measurements");
      sub.add_option("--schedulers", f->schedulers,
                     "comma-separated, side by side: corun (extender rule: the node whose plan "
                     "gains most), corun-pack (consolidating: a GPU in use where every SLA "
                     "holds as predicted before a new one), binpack, spread")
          ->delimiter(',')
          ->capture_default_str();
      sub.add_option("--gpu-budget", f->gpu_budget,
                     "GPUs in use over the cluster, at most, for every scheduler (0 = all)")
          ->check(CLI::Range(0, 1 << 20))
          ->capture_default_str();
      add_measure_flags(sub, *f);
      add_node_search_flags(sub, *f);
      return std::function<int()>([f] { return run(*f); });
    },
});

}  // namespace
}  // namespace corun::cli::cmd_eval_cluster

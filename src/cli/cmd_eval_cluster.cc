// corun eval cluster FILE: a seeded stream of model arrivals and departures over K nodes of G
// GPUs, placed by several schedulers side by side (corun's extender rule, corun's consolidating
// rule, memory bin-packing, spread), optionally under one cluster-wide GPU budget; every changed
// node is measured on the testbed after each event.
#include <algorithm>
#include <chrono>
#include <map>
#include <cstdio>
#include <random>

#include "command.h"
#include "common.h"
#include "corun/core/strings.h"
#include "corun/plan/node.h"
#include "corun/plan/objective.h"
#include "corun/runtime/node_plan.h"
#include "corun/runtime/testbed_predictor.h"
#include "node_report.h"

namespace corun::cli {
namespace {

// Every scheduler `eval cluster` knows, in its default order.
const std::vector<std::string> kSchedulers = {"corun", "corun-pack", "binpack", "spread"};

struct Flags : PlanFlags {
  int nodes = 4;
  int gpus = 8;
  int arrivals = 200;
  double residents = 24;  // mean models in the cluster (lifetime / inter-arrival time)
  std::vector<std::string> schedulers = kSchedulers;  // side by side, in this order
  int gpu_budget = 0;  // GPUs in use cluster-wide, at most (0 = the whole cluster)
};

// One event of the stream: an arrival of template `tmpl` as model `id`, or its departure.
struct Event {
  double t = 0;
  bool arrival = true;
  std::size_t id = 0;
  std::size_t tmpl = 0;
};

// Poisson arrivals (rate 1), exponential lifetimes of mean `residents`, uniform templates.
std::vector<Event> make_stream(const Flags& f, std::size_t templates) {
  std::mt19937_64 rng(f.seed);
  std::exponential_distribution<double> gap(1.0), life(1.0 / f.residents);
  std::uniform_int_distribution<std::size_t> pick(0, templates - 1);
  std::vector<Event> ev;
  double t = 0;
  for (int i = 0; i < f.arrivals; ++i) {
    t += gap(rng);
    const auto k = pick(rng);
    const auto id = static_cast<std::size_t>(i);
    ev.push_back({t, true, id, k});
    ev.push_back({t + life(rng), false, id, k});
  }
  std::stable_sort(ev.begin(), ev.end(), [](const Event& a, const Event& b) { return a.t < b.t; });
  return ev;
}

// One node under one scheduler: its models (stream ids), its plan and last measurement.
struct Node {
  std::vector<std::size_t> ids;
  std::unique_ptr<Workload> w;  // stable address: the session's planner refers to it
  std::unique_ptr<NodeSession> session;
  NodePlan plan;
  NodeOutcome outcome;
};

struct Totals {
  double gpu_sum = 0, utility_sum = 0, decision_ms = 0;
  double utility_held_sum = 0;  // the same, counting only models that held every SLA
  std::size_t gpu_max = 0, violations = 0, rejected = 0, intervals = 0;
  std::map<std::string, std::size_t> violations_by_template;  // the same, by template name
  std::map<std::string, std::size_t> rejected_by_template;
  std::vector<nlohmann::json> placed;  // per arrival: [node, gpu] where it went, or null
};

// What the memory rules read of the mix: each template's request (its largest configuration's
// memory, what a GPU-sharing scheduler reserves) and one GPU's memory, in bytes.
struct MemoryRequests {
  std::vector<double> template_bytes;
  double gpu_bytes = 0;
};

Result<MemoryRequests> memory_requests(const Context& ctx, const Workload& mix, const Flags& f) {
  auto session = make_node_session(ctx, mix, f);
  if (!session) return session.error();
  auto in = (*session)->planner->placement_input(node_layouts(mix).front());
  if (!in) return in.error();
  return MemoryRequests{in->vram_request_bytes, in->unit_vram_bytes.front()};
}

class Cluster {
 public:
  Cluster(std::string name, const Context& ctx, const Workload& mix, const MemoryRequests& requests,
          const Flags& f, const Testbed& tb)
      : name_(std::move(name)),
        ctx_(ctx),
        mix_(&mix),
        requests_(&requests),
        f_(&f),
        tb_(&tb),
        nodes_(static_cast<std::size_t>(f.nodes)) {
    for (auto& n : nodes_) {
      n.w = std::make_unique<Workload>(node_workload({}));
    }
  }

  // Places stream model `id` (a copy of template `tmpl`); false when no node takes it.
  Result<bool> arrive(std::size_t id, std::size_t tmpl) {
    const auto t0 = std::chrono::steady_clock::now();
    tmpl_of_[id] = tmpl;
    Result<bool> r = name_ == "corun"        ? arrive_corun(id)
                     : name_ == "corun-pack" ? arrive_pack(id)
                                             : arrive_rule(id, tmpl);
    totals_.decision_ms +=
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (r && !*r) {
      ++totals_.rejected;
      ++totals_.rejected_by_template[mix_->models[tmpl].name];
    }
    if (r) {
      const auto at = placement_of(id);
      totals_.placed.push_back(at.empty() ? nlohmann::json(nullptr) : nlohmann::json(at));
    }
    return r;
  }

  Status depart(std::size_t id) {
    for (std::size_t k = 0; k < nodes_.size(); ++k) {
      auto& ids = nodes_[k].ids;
      const auto it = std::find(ids.begin(), ids.end(), id);
      if (it == ids.end()) continue;
      const auto m = static_cast<std::size_t>(it - ids.begin());
      ids.erase(it);
      std::vector<std::int32_t> a = nodes_[k].plan.assignment;
      a.erase(a.begin() + static_cast<std::ptrdiff_t>(m));
      if (name_ == "corun") {
        // corun re-plans the node; under a budget, a re-plan that would open more GPUs than
        // the node had keeps the placement (and re-plans the knobs) instead.
        auto n = make_node(ids, nullptr);
        if (!n) return n.error();
        if (f_->gpu_budget == 0 || gpus_used(n->plan) <= gpus_used(nodes_[k].plan)) {
          nodes_[k] = std::move(*n);
          dirty_[k] = true;
          return Status{};
        }
      }
      return adopt(k, ids, &a);
    }
    return Status{};
  }

  // Measures changed nodes and adds this interval to the totals.
  void account() {
    std::size_t gpus = 0;
    double held = 0;
    for (std::size_t k = 0; k < nodes_.size(); ++k) {
      Node& n = nodes_[k];
      if (dirty_[k]) {
        n.outcome = n.ids.empty() ? NodeOutcome{}
                                  : measure_node_plan(*n.w, n.plan, *tb_,
                                                      {f_->window_s, f_->seed + 1000 * k});
        dirty_[k] = false;
      }
      gpus += gpus_used(n.plan);
      totals_.violations += n.outcome.violations;
      for (std::size_t m = 0; m < n.ids.size(); ++m) {
        const ModelMetrics* mm = n.outcome.measured.find(m);
        if (mm == nullptr || !measured_meets_sla(n.w->models[m], *mm)) {
          ++totals_.violations_by_template[mix_->models[tmpl_of_.at(n.ids[m])].name];
        } else if (mm->ok()) {
          held += model_utility(*n.w, m, n.outcome.plan.config[m], as_predicted(*mm));
        }
      }
      totals_.utility_sum += n.outcome.measured_utility;
    }
    totals_.gpu_sum += static_cast<double>(gpus);
    totals_.utility_held_sum += held;
    totals_.gpu_max = std::max(totals_.gpu_max, gpus);
    ++totals_.intervals;
  }

  [[nodiscard]] const std::string& name() const { return name_; }
  [[nodiscard]] const Totals& totals() const { return totals_; }

 private:
  // Per GPU of a node plan: whether at least one model runs on it.
  [[nodiscard]] std::vector<bool> busy_gpus(const NodePlan& plan) const {
    std::vector<bool> busy(static_cast<std::size_t>(f_->gpus), false);
    for (const auto u : plan.assignment) {
      if (u != kNotPlaced) busy[static_cast<std::size_t>(u)] = true;
    }
    return busy;
  }

  // GPUs of a node plan with at least one model.
  [[nodiscard]] std::size_t gpus_used(const NodePlan& plan) const {
    const auto busy = busy_gpus(plan);
    return static_cast<std::size_t>(std::count(busy.begin(), busy.end(), true));
  }

  // GPUs in use over the cluster, by the plans in force.
  [[nodiscard]] std::size_t gpus_in_use() const {
    std::size_t g = 0;
    for (const auto& n : nodes_) g += gpus_used(n.plan);
    return g;
  }

  // Whether the cluster may run on `gpus` GPUs under the budget.
  [[nodiscard]] bool within_budget(std::size_t gpus) const {
    return f_->gpu_budget == 0 || gpus <= static_cast<std::size_t>(f_->gpu_budget);
  }

  // {node, GPU} of stream model `id`, or empty when it is not in the cluster.
  [[nodiscard]] std::vector<std::size_t> placement_of(std::size_t id) const {
    for (std::size_t k = 0; k < nodes_.size(); ++k) {
      const auto& ids = nodes_[k].ids;
      const auto it = std::find(ids.begin(), ids.end(), id);
      if (it != ids.end()) {
        const auto m = static_cast<std::size_t>(it - ids.begin());
        return {k, static_cast<std::size_t>(nodes_[k].plan.assignment[m])};
      }
    }
    return {};
  }

  Workload node_workload(const std::vector<std::size_t>& ids) const {
    Workload w = *mix_;
    w.node.options.assign(static_cast<std::size_t>(f_->gpus), {MigPartition{}});
    w.models.clear();
    for (const auto id : ids) {
      ModelSpec m = mix_->models[tmpl_of_.at(id)];
      m.name += "-" + std::to_string(id);
      m.gpu.reset();
      w.models.push_back(std::move(m));
    }
    return w;
  }

  // A node running `ids`, planned by corun (`assignment` null) or on the GPUs of
  // `assignment` (its planner chooses each GPU's knobs).
  Result<Node> make_node(const std::vector<std::size_t>& ids,
                         const std::vector<std::int32_t>* assignment) {
    Node n;
    n.ids = ids;
    n.w = std::make_unique<Workload>(node_workload(ids));
    if (ids.empty()) return n;
    auto s = make_node_session(ctx_, *n.w, *f_, unit_plans_.get());
    if (!s) return s.error();
    n.session = std::move(*s);
    const NodeLayout layout = node_layouts(*n.w).front();
    auto p = assignment == nullptr ? n.session->planner->plan(layout)
                                   : n.session->planner->plan_assignment(layout, *assignment, name_);
    if (!p) return p.error();
    n.plan = std::move(*p);
    return n;
  }

  // Node k runs `ids` as `assignment` says, or as corun plans them (null).
  Status adopt(std::size_t k, const std::vector<std::size_t>& ids,
               const std::vector<std::int32_t>* assignment) {
    auto n = make_node(ids, assignment);
    if (!n) return n.error();
    nodes_[k] = std::move(*n);
    dirty_[k] = true;
    return Status{};
  }

  // The extender's rule: nodes whose plan with the newcomer holds every SLA as predicted,
  // the one whose predicted utility gains most (ties: the lower node). Under a budget, a node
  // plan that would take the cluster past it is not taken.
  Result<bool> arrive_corun(std::size_t id) {
    std::optional<std::size_t> best;
    const std::size_t in_use = gpus_in_use();
    double best_gain = 0;
    std::vector<Node> trials(nodes_.size());
    for (std::size_t k = 0; k < nodes_.size(); ++k) {
      auto ids = nodes_[k].ids;
      ids.push_back(id);
      auto trial = make_node(ids, nullptr);
      if (!trial) return trial.error();
      trials[k] = std::move(*trial);
      if (!trials[k].plan.feasible) continue;
      if (!within_budget(in_use - gpus_used(nodes_[k].plan) + gpus_used(trials[k].plan))) {
        continue;
      }
      const double gain = trials[k].plan.utility - nodes_[k].plan.utility;
      if (!best || gain > best_gain + 1e-9) {
        best = k;
        best_gain = gain;
      }
    }
    if (!best) return false;
    nodes_[*best] = std::move(trials[*best]);
    dirty_[*best] = true;
    return true;
  }

  // corun's consolidating rule (interference-aware packing): the newcomer goes to a GPU already
  // in use where the node's plan with it there (each GPU's knobs re-planned, the placement of
  // the others kept) holds every SLA as predicted, the one whose predicted utility gains most
  // (ties: lower node, lower GPU); only when no GPU in use can take it does it open one (the
  // lowest free GPU of the lowest node where it holds, within the budget); else it is refused.
  Result<bool> arrive_pack(std::size_t id) {
    const bool may_open = within_budget(gpus_in_use() + 1);
    for (const bool opening : {false, true}) {
      if (opening && !may_open) break;
      std::optional<std::size_t> best;
      double best_gain = 0;
      Node chosen;
      for (std::size_t k = 0; k < nodes_.size(); ++k) {
        const auto busy = busy_gpus(nodes_[k].plan);
        for (std::size_t g = 0; g < busy.size(); ++g) {
          if (busy[g] == opening) continue;
          auto ids = nodes_[k].ids;
          ids.push_back(id);
          auto a = nodes_[k].plan.assignment;
          a.push_back(static_cast<std::int32_t>(g));
          auto trial = make_node(ids, &a);
          if (!trial) return trial.error();
          if (opening) {
            if (!trial->plan.feasible) break;  // free GPUs of a node are alike: try the next node
            nodes_[k] = std::move(*trial);
            dirty_[k] = true;
            return true;
          }
          if (!trial->plan.feasible) continue;
          const double gain = trial->plan.utility - nodes_[k].plan.utility;
          if (!best || gain > best_gain + 1e-9) {
            best = k;
            best_gain = gain;
            chosen = std::move(*trial);
          }
        }
      }
      if (best) {
        nodes_[*best] = std::move(chosen);
        dirty_[*best] = true;
        return true;
      }
    }
    return false;
  }

  // Memory bin-packing or spread over every GPU of the cluster (node-major), by the largest
  // configuration's memory as the request; the node then plans the knobs of its GPUs. Under a
  // budget, a GPU not in use is a candidate only while the cluster is below it.
  Result<bool> arrive_rule(std::size_t id, std::size_t tmpl) {
    const bool may_open = within_budget(gpus_in_use() + 1);
    std::optional<std::pair<std::size_t, std::size_t>> best;
    double best_key = 0;
    const double gpu_bytes = requests_->gpu_bytes;
    const double req = requests_->template_bytes[tmpl];
    for (std::size_t k = 0; k < nodes_.size(); ++k) {
      const auto& ids = nodes_[k].ids;
      std::vector<double> used(static_cast<std::size_t>(f_->gpus), 0.0);
      for (std::size_t m = 0; m < ids.size(); ++m) {
        used[static_cast<std::size_t>(nodes_[k].plan.assignment[m])] +=
            requests_->template_bytes[tmpl_of_.at(ids[m])];
      }
      const auto busy = busy_gpus(nodes_[k].plan);
      for (std::size_t g = 0; g < used.size(); ++g) {
        if (used[g] + req > gpu_bytes) continue;
        if (!busy[g] && !may_open) continue;
        const double key = name_ == "binpack" ? used[g] : -used[g] / gpu_bytes;
        if (!best || key > best_key + 1e-9) {
          best = std::make_pair(k, g);
          best_key = key;
        }
      }
    }
    if (!best) return false;
    const std::size_t k = best->first;
    auto ids = nodes_[k].ids;
    ids.push_back(id);
    std::vector<std::int32_t> a = nodes_[k].plan.assignment;
    a.push_back(static_cast<std::int32_t>(best->second));
    auto st = adopt(k, ids, &a);
    if (!st.ok()) return st.error();
    return true;
  }

  std::string name_;
  const Context ctx_;  // the verb's: --seed and --threads of the node planners
  const Workload* mix_;
  const MemoryRequests* requests_;
  const Flags* f_;
  const Testbed* tb_;
  std::vector<Node> nodes_;
  std::vector<bool> dirty_ = std::vector<bool>(nodes_.size(), false);
  std::map<std::size_t, std::size_t> tmpl_of_;
  // Per-unit plans of this scheduler's node plans, by model content: an arrival's what-ifs and
  // a departure's re-plan solve only the GPU sets no earlier plan of this scheduler met (one
  // cache per scheduler, so that no scheduler's decision time profits from another's). At a
  // stable address: the nodes' planners refer to it.
  std::unique_ptr<UnitPlanCache> unit_plans_ = std::make_unique<UnitPlanCache>();
  Totals totals_;
};

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
    if (std::find(kSchedulers.begin(), kSchedulers.end(), name) == kSchedulers.end()) {
      return report_error(Error("--schedulers: unknown scheduler '" + name +
                                "' (known: " + join(kSchedulers, ", ") + ")"));
    }
  }
  if (f.schedulers.empty()) return report_error(Error("--schedulers: names no scheduler"));
  auto testbed = make_testbed(f.testbed);
  if (!testbed) return report_error(testbed.error());
  const Context ctx = f.context();
  const auto stream = make_stream(f, mix->models.size());
  const auto requests = memory_requests(ctx, *mix, f);
  if (!requests) return report_error(requests.error());

  std::vector<Cluster> clusters;
  for (const auto& name : f.schedulers) {
    clusters.emplace_back(name, ctx, *mix, *requests, f, **testbed);
  }
  for (std::size_t e = 0; e < stream.size(); ++e) {
    const Event& ev = stream[e];
    for (auto& c : clusters) {
      if (ev.arrival) {
        auto r = c.arrive(ev.id, ev.tmpl);
        if (!r) return report_error(r.error());
      } else if (auto st = c.depart(ev.id); !st.ok()) {
        return report_error(st.error());
      }
      c.account();
    }
  }

  const double n = static_cast<double>(stream.size());
  if (f.json) {
    nlohmann::json rows = nlohmann::json::array();
    for (const auto& c : clusters) {
      const Totals& t = c.totals();
      rows.push_back({{"scheduler", c.name()},
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
                          {"events", stream.size()},  {"schedulers", rows}};
    std::printf("%s\n", out.dump().c_str());
    return kExitOk;
  }
  Table t({"scheduler", "GPUs used (mean)", "GPUs used (max)", "SLA violations (model-intervals)",
           "mean measured utility", "held-SLA utility", "rejected", "decision ms (total)"});
  for (const auto& c : clusters) {
    const Totals& x = c.totals();
    t.add({c.name(), fixed(x.gpu_sum / n, 2), std::to_string(x.gpu_max),
           std::to_string(x.violations), fixed(x.utility_sum / n, 3),
           fixed(x.utility_held_sum / n, 3), std::to_string(x.rejected),
           fixed(x.decision_ms, 0)});
  }
  std::printf(
      "corun eval cluster: %s, %d node(s) x %d %s, %d arrivals (mean %.0f resident), %zu "
      "events, seed %llu, testbed %s%s\n%s",
      mix->file.c_str(), f.nodes, f.gpus, mix->device.display_name.c_str(), f.arrivals,
      f.residents, stream.size(), static_cast<unsigned long long>(f.seed), f.testbed.c_str(),
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
}  // namespace corun::cli

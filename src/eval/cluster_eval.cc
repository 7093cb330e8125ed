#include "corun/eval/cluster_eval.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <optional>
#include <random>
#include <utility>

#include "corun/plan/node_placement.h"
#include "corun/plan/objective.h"
#include "corun/runtime/node_plan.h"
#include "corun/runtime/testbed_predictor.h"

namespace corun {
namespace {

// One event of the stream: an arrival of template `tmpl` as model `id`, or its departure.
struct Event {
  double t = 0;
  bool arrival = true;
  std::size_t id = 0;
  std::size_t tmpl = 0;
};

// Poisson arrivals (rate 1), exponential lifetimes of mean `residents`, uniform templates.
std::vector<Event> make_stream(const ClusterEvalOptions& f, std::uint64_t seed,
                               std::size_t templates) {
  std::mt19937_64 rng(seed);
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
  std::unique_ptr<Workload> w;  // stable address: the planner refers to it
  std::shared_ptr<NodePlanner> planner;
  NodePlan plan;
  NodeOutcome outcome;
};

// What the memory rules read of the mix: each template's request (its largest configuration's
// memory, what a GPU-sharing scheduler reserves) and one GPU's memory, in bytes.
struct MemoryRequests {
  std::vector<double> template_bytes;
  double gpu_bytes = 0;
};

Result<MemoryRequests> memory_requests(const Context& ctx, const Workload& mix,
                                       const ClusterEvalOptions& f) {
  auto planner = f.planner(ctx, mix, nullptr);
  if (!planner) return planner.error();
  auto in = (*planner)->placement_input(node_layouts(mix).front());
  if (!in) return in.error();
  return MemoryRequests{in->vram_request_bytes, in->unit_vram_bytes.front()};
}

class Cluster {
 public:
  Cluster(std::string name, const Context& ctx, const Workload& mix, const MemoryRequests& requests,
          const ClusterEvalOptions& f, const Testbed& tb)
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
                                  : measure_node_plan(Context{.seed = ctx_.seed + 1000 * k}, *n.w,
                                                      n.plan, *tb_, MeasureOptions(f_->window_s));
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
  [[nodiscard]] const ClusterTotals& totals() const { return totals_; }

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
    auto s = f_->planner(ctx_, *n.w, unit_plans_.get());
    if (!s) return s.error();
    n.planner = std::move(*s);
    const NodeLayout layout = node_layouts(*n.w).front();
    auto p = assignment == nullptr ? n.planner->plan(layout)
                                   : n.planner->plan_assignment(layout, *assignment, name_);
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
  const Context ctx_;  // the evaluation's: the seed and threads of the node planners
  const Workload* mix_;
  const MemoryRequests* requests_;
  const ClusterEvalOptions* f_;
  const Testbed* tb_;
  std::vector<Node> nodes_;
  std::vector<bool> dirty_ = std::vector<bool>(nodes_.size(), false);
  std::map<std::size_t, std::size_t> tmpl_of_;
  // Per-unit plans of this scheduler's node plans, by model content: an arrival's what-ifs and
  // a departure's re-plan solve only the GPU sets no earlier plan of this scheduler met (one
  // cache per scheduler, so that no scheduler's decision time profits from another's). At a
  // stable address: the nodes' planners refer to it.
  std::unique_ptr<UnitPlanCache> unit_plans_ = std::make_unique<UnitPlanCache>();
  ClusterTotals totals_;
};

}  // namespace

Result<ClusterEval> evaluate_cluster(const Context& ctx, const Workload& mix,
                                     const Testbed& testbed, const ClusterEvalOptions& options) {
  const ClusterEvalOptions& f = options;
  const auto stream = make_stream(f, ctx.seed, mix.models.size());
  const auto requests = memory_requests(ctx, mix, f);
  if (!requests) return requests.error();

  std::vector<Cluster> clusters;
  for (const auto& name : f.schedulers) {
    clusters.emplace_back(name, ctx, mix, *requests, f, testbed);
  }
  for (std::size_t e = 0; e < stream.size(); ++e) {
    const Event& ev = stream[e];
    for (auto& c : clusters) {
      if (ev.arrival) {
        auto r = c.arrive(ev.id, ev.tmpl);
        if (!r) return r.error();
      } else if (auto st = c.depart(ev.id); !st.ok()) {
        return st.error();
      }
      c.account();
    }
  }

  ClusterEval out;
  out.events = stream.size();
  for (const auto& c : clusters) out.runs.push_back({c.name(), c.totals()});
  return out;
}

}  // namespace corun

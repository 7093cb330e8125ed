#include "corun/mapping/policy.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "corun/core/rng.h"
#include "corun/core/strings.h"
#include "corun/mapping/agent.h"

namespace corun::mapping {

RunResult TrialRunner::run(const Context& ctx, std::span<const Placement> mapping) {
  ++executions_;
  return executor_->run(ctx, mapping);
}

double TrialRunner::makespan_ms(const Context& ctx, std::span<const Placement> mapping) {
  ++executions_;
  return executor_->makespan_s(ctx, mapping) * 1e3;
}

std::size_t cpu_slots(const PlacementProblem& p) {
  double threads = 0;
  for (std::size_t i = 0; i < p.size(); ++i) threads += p.tool(i).cpu_threads;
  const double mean = p.size() ? threads / static_cast<double>(p.size()) : 1.0;
  const double slots = std::floor(std::max(1, p.device().cpu.cores) / std::max(1.0, mean));
  return static_cast<std::size_t>(std::max(1.0, slots));
}

HeftProblem heft_instance(const PlacementProblem& p) {
  HeftProblem h;
  h.tasks = p.size();
  h.processors = 1 + cpu_slots(p);
  h.cost.assign(h.tasks * h.processors, 0);
  for (std::size_t t = 0; t < h.tasks; ++t) {
    const ToolCost& c = p.cost(t);
    h.cost[t * h.processors] =
        p.gpu_allowed(t) ? c.gpu_s() * 1e3 : std::numeric_limits<double>::infinity();
    for (std::size_t q = 1; q < h.processors; ++q) h.cost[t * h.processors + q] = c.cpu_s * 1e3;
    for (auto j : p.succs(t)) h.edges.push_back({t, j, 0.0});
  }
  return h;
}

Result<PolicyResult> AllGpuPolicy::decide(TrialRunner& runner, const Context& /*ctx*/) {
  const PlacementProblem& p = runner.problem();
  PolicyResult r;
  r.mapping.resize(p.size());
  for (std::size_t i = 0; i < p.size(); ++i) {
    r.mapping[i] = p.gpu_allowed(i) ? Placement::kGpuQueue : Placement::kCpu;
  }
  return r;
}

Result<PolicyResult> HeftPolicy::decide(TrialRunner& runner, const Context& /*ctx*/) {
  const PlacementProblem& p = runner.problem();
  auto s = heft(heft_instance(p));
  if (!s) return s.error().wrap(p.scenario().name);
  PolicyResult r;
  r.mapping.resize(p.size());
  for (std::size_t i = 0; i < p.size(); ++i) {
    r.mapping[i] = s->processor[i] == 0 ? Placement::kGpuQueue : Placement::kCpu;
  }
  r.predicted_makespan_ms = s->makespan;
  return r;
}

Result<PolicyResult> DmdaPolicy::decide(TrialRunner& runner, const Context& /*ctx*/) {
  const PlacementProblem& p = runner.problem();
  const std::size_t n = p.size();
  const std::size_t workers = 1 + cpu_slots(p);  // worker 0 is the CUDA worker
  constexpr double kAlpha = 1, kBeta = 1, kGamma = 1000, kEnergy = 0;
  std::vector<double> queue_free(workers, 0);
  std::vector<double> ready(n, 0), end(n, 0);
  std::vector<int> pending(n);
  std::vector<bool> pushed(n, false);
  for (std::size_t i = 0; i < n; ++i) pending[i] = static_cast<int>(p.preds(i).size());
  PolicyResult r;
  r.mapping.assign(n, Placement::kCpu);
  for (std::size_t step = 0; step < n; ++step) {
    // Push the ready task with the earliest expected ready time (ties: lower index).
    std::size_t t = n;
    for (std::size_t i = 0; i < n; ++i) {
      if (!pushed[i] && pending[i] == 0 && (t == n || ready[i] < ready[t])) t = i;
    }
    if (t == n) return Error("dmda: the tool DAG has a cycle");
    pushed[t] = true;
    const double now = ready[t];
    const ToolCost& c = p.cost(t);
    std::vector<double> ends(workers, std::numeric_limits<double>::infinity());
    std::vector<double> xfers(workers, 0);
    double best_end = std::numeric_limits<double>::infinity();
    for (std::size_t w = 0; w < workers; ++w) {
      if (w == 0 && !p.gpu_allowed(t)) continue;
      // dmda's transfer estimate: the input over PCIe twice (its 2 x size / bandwidth).
      const double xfer = w == 0 ? gpu::pcie_copy_s(2.0 * p.tool(t).input_bytes, p.gpu()) : 0.0;
      const double exec = w == 0 ? c.compute_s() : c.cpu_s;
      const double start = std::max(queue_free[w], now + xfer);
      ends[w] = start + exec;
      xfers[w] = xfer;
      best_end = std::min(best_end, ends[w]);
    }
    std::size_t chosen = workers;
    double best_fitness = std::numeric_limits<double>::infinity();
    for (std::size_t w = 0; w < workers; ++w) {
      if (!std::isfinite(ends[w])) continue;
      const double fitness = kAlpha * (ends[w] - best_end) + kBeta * xfers[w] + kGamma * kEnergy;
      if (fitness < best_fitness) {
        best_fitness = fitness;
        chosen = w;
      }
    }
    queue_free[chosen] = ends[chosen];
    end[t] = ends[chosen];
    r.mapping[t] = chosen == 0 ? Placement::kGpuQueue : Placement::kCpu;
    for (auto j : p.succs(t)) {
      ready[j] = std::max(ready[j], end[t]);
      --pending[j];
    }
  }
  r.predicted_makespan_ms = *std::max_element(end.begin(), end.end()) * 1e3;
  return r;
}

namespace {

// Critical path with every tool at its faster standalone time: no mapping can beat it.
double lower_bound_ms(const PlacementProblem& p) {
  std::vector<double> finish(p.size(), 0);
  double best = 0;
  for (auto i : p.topo_order()) {
    double start = 0;
    for (auto j : p.preds(i)) start = std::max(start, finish[j]);
    const ToolCost& c = p.cost(i);
    const double own = p.gpu_allowed(i) ? std::min(c.cpu_s, c.gpu_s()) : c.cpu_s;
    finish[i] = start + own * 1e3;
    best = std::max(best, finish[i]);
  }
  return best;
}

}  // namespace

Result<PolicyResult> BanditPolicy::decide(TrialRunner& runner, const Context& ctx) {
  const PlacementProblem& p = runner.problem();
  const std::uint64_t arms = p.mapping_count();
  if (arms > max_arms_) {
    return Error("bandit: " + std::to_string(arms) + " mappings exceed the arm limit of " +
                     std::to_string(max_arms_),
                 Error::Kind::kResource);
  }
  const double bound = lower_bound_ms(p);
  const auto budget = static_cast<std::uint64_t>(
      std::ceil(std::max(1.0, budget_factor_) * static_cast<double>(arms)));
  std::vector<double> sum(arms, 0);
  std::vector<std::uint64_t> pulls(arms, 0);
  for (std::uint64_t t = 0; t < budget; ++t) {
    std::uint64_t arm = 0;
    if (t < arms) {
      arm = t;  // initialisation: every arm once
    } else {
      double best = -1;
      const double log_t = std::log(static_cast<double>(t));
      for (std::uint64_t a = 0; a < arms; ++a) {
        const double n = static_cast<double>(pulls[a]);
        const double ucb = sum[a] / n + std::sqrt(2 * log_t / n);
        if (ucb > best) {
          best = ucb;
          arm = a;
        }
      }
    }
    const double ms = runner.makespan_ms(ctx.derived({t}), p.mapping_at(arm));
    sum[arm] += std::isfinite(ms) ? std::min(1.0, bound / ms) : 0.0;
    ++pulls[arm];
  }
  std::uint64_t best = 0;
  for (std::uint64_t a = 1; a < arms; ++a) {
    const double ma = sum[a] / static_cast<double>(pulls[a]);
    const double mb = sum[best] / static_cast<double>(pulls[best]);
    if (ma > mb || (ma == mb && pulls[a] > pulls[best])) best = a;
  }
  PolicyResult r;
  r.mapping = p.mapping_at(best);
  r.executions = runner.executions();
  r.log.push_back("UCB1: " + std::to_string(arms) + " arms, " + std::to_string(budget) +
                  " pulls; best arm pulled " + std::to_string(pulls[best]) + " times");
  return r;
}

Result<PolicyResult> BruteForcePolicy::decide(TrialRunner& runner, const Context& ctx) {
  const PlacementProblem& p = runner.problem();
  const std::uint64_t count = p.mapping_count();
  if (count > max_) {
    return Error("brute-force: " + std::to_string(count) + " mappings exceed the limit of " +
                     std::to_string(max_),
                 Error::Kind::kResource);
  }
  const Context conditions = ctx.derived({0});
  double best_ms = std::numeric_limits<double>::infinity();
  std::uint64_t best = 0;
  for (std::uint64_t k = 0; k < count; ++k) {
    const double ms = runner.makespan_ms(conditions, p.mapping_at(k));
    if (ms < best_ms) {
      best_ms = ms;
      best = k;
    }
  }
  if (!std::isfinite(best_ms)) return Error("brute-force: every mapping failed");
  PolicyResult r;
  r.mapping = p.mapping_at(best);
  r.executions = runner.executions();
  return r;
}

const std::vector<std::string>& policy_names() {
  static const std::vector<std::string> names = {"all-gpu", "heft",        "dmda",
                                                 "bandit",  "brute-force", "agent"};
  return names;
}

Result<std::unique_ptr<Policy>> make_policy(std::string_view name, std::shared_ptr<Agent> agent) {
  if (name == "all-gpu") return std::unique_ptr<Policy>(new AllGpuPolicy());
  if (name == "heft") return std::unique_ptr<Policy>(new HeftPolicy());
  if (name == "dmda") return std::unique_ptr<Policy>(new DmdaPolicy());
  if (name == "bandit") return std::unique_ptr<Policy>(new BanditPolicy());
  if (name == "brute-force") return std::unique_ptr<Policy>(new BruteForcePolicy());
  if (name == "agent") {
    if (!agent) return Error("policy 'agent' needs an agent (builtin or llm)");
    return std::unique_ptr<Policy>(new AgentPolicy(std::move(agent)));
  }
  return Error("unknown policy '" + std::string(name) + "'" + did_you_mean(name, policy_names()));
}

}  // namespace corun::mapping

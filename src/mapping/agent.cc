#include "corun/mapping/agent.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

namespace corun::mapping {

Mapping BuiltinAgent::initial_mapping(const Observation& o) {
  Mapping m(o.nodes.size(), Placement::kCpu);
  for (std::size_t i = 0; i < o.nodes.size(); ++i) {
    const NodeView& n = o.nodes[i];
    const bool gpu_ok =
        std::find(n.options.begin(), n.options.end(), Placement::kGpuQueue) != n.options.end();
    if (gpu_ok && n.gpu_ms && *n.gpu_ms < n.cpu_ms) m[i] = Placement::kGpuQueue;
  }
  return m;
}

namespace {

// True when every GPU-capable node's footprint fits the budget at once: then VRAM is never
// short, gpu_now never fails and never differs from gpu_queue.
bool vram_ample(const Observation& o) {
  double sum = 0;
  for (const auto& n : o.nodes) {
    if (n.options.size() > 1) sum += n.vram_gb;
  }
  return sum <= o.vram_budget_gb;
}

std::string fmt_ms(double ms) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f ms", ms);
  return buf;
}

// The current mapping's burst is predicted to break a co-runner's SLA: measure every way of
// taking load off the GPU (each GPU tool moved to the CPU, and all of them at once, which
// puts nothing on the GPU and so protects every co-runner), then move to the fastest mapping
// measured so far that is predicted to protect them.
AgentAction protect_corunners(const Observation& o) {
  const Mapping& cur = *o.current;
  AgentAction a;
  Mapping off_gpu = cur;
  for (std::size_t i = 0; i < cur.size(); ++i) {
    if (!on_gpu(cur[i])) continue;
    off_gpu[i] = Placement::kCpu;
    Mapping moved = cur;
    moved[i] = Placement::kCpu;
    if (!o.find_mapping(moved)) a.probes.push_back(ProbeRequest::move(i, Placement::kCpu));
  }
  if (!o.find_mapping(off_gpu)) a.probes.push_back(ProbeRequest::of(off_gpu));
  const std::string broken = o.current_stat->predicted_breaches.front().describe();
  if (!a.probes.empty()) {
    a.reason = "the current mapping is predicted to break " + broken + ": measure " +
               std::to_string(a.probes.size()) + " ways of taking tools off the GPU";
    return a;
  }
  for (const MappingStat& s : o.mappings) {  // fastest mean first
    if (s.makespan_ms.n == 0 || s.failures > 0 || !s.protects_corunners()) continue;
    a.mapping = s.mapping;
    a.reason = "the current mapping is predicted to break " + broken +
               ": move to the fastest mapping predicted to protect every co-runner (" +
               fmt_ms(s.makespan_ms.mean) + ")";
    return a;
  }
  a.done = true;
  a.reason = "no measured mapping is predicted to protect the co-runners";
  return a;
}

/// What the agent judges probes against: the observation and the current mapping's standing.
struct CurrentView {
  const Observation& o;
  const Mapping& cur;
  bool ample;   ///< vram_ample(o)
  bool cur_ok;  ///< the current mapping ran, and never failed
  double base;  ///< its mean makespan; +infinity unless cur_ok

  /// @brief Whether a probe can possibly pay off, judged from the observation alone.
  [[nodiscard]] bool useful(const ProbeRequest& p) const {
    const auto v = o.apply(p);
    if (!v) return false;
    for (std::size_t i = 0; i < v->size(); ++i) {
      if ((*v)[i] == cur[i]) continue;
      // With ample VRAM, gpu_now and gpu_queue are the same schedule: stay on gpu_queue.
      if (ample && (*v)[i] == Placement::kGpuNow) return false;
      // A tool whose standalone time on its new side already exceeds the current makespan
      // cannot be part of a faster mapping (contention only slows it further).
      const NodeView& n = o.nodes[i];
      const double own = on_gpu((*v)[i]) ? n.gpu_ms.value_or(0) : n.cpu_ms;
      if (std::isfinite(base) && own > 1.1 * base) return false;
    }
    if (const MappingStat* s = o.find_mapping(*v); s && s->failures > 0) return false;
    // Predicted to break a co-running model's SLA: excluded, however fast.
    if (const MappingStat* s = o.find_mapping(*v); s && !s->protects_corunners()) return false;
    return true;
  }
};

/// @brief Sorts the useful probes the monitor hints at into unmeasured (or stale) and noisy.
void sort_hinted_probes(const CurrentView& v, std::vector<ProbeRequest>* unmeasured,
                        std::vector<ProbeRequest>* noisy) {
  for (const auto& h : v.o.hints) {
    if (!h.probe || !v.useful(*h.probe)) continue;
    if (h.kind == Hint::Kind::kNoisy) {
      noisy->push_back(*h.probe);
    } else {
      unmeasured->push_back(*h.probe);
    }
  }
}

/// @brief The noisy comparisons that might be improvements.
std::vector<ProbeRequest> worth_remeasuring(const Observation& o,
                                            const std::vector<ProbeRequest>& noisy) {
  std::vector<ProbeRequest> worth;
  for (const auto& p : noisy) {
    for (const auto& s : o.probes) {
      if (s.probe == p && s.delta_ms.mean < 0) worth.push_back(p);
    }
  }
  return worth;
}

/// @brief The best significant improvement among measured, never-failing variants (null when
/// none), with its score in `best_score`.
const ProbeStat* best_improvement(const CurrentView& v, const std::vector<ProbeRequest>& noisy,
                                  double min_gain, double* best_score) {
  const Observation& o = v.o;
  const ProbeStat* best = nullptr;
  for (const auto& s : o.probes) {
    if (!v.useful(s.probe) || s.failures > 0) continue;
    const MappingStat* ms = o.find_mapping(s.variant);
    if (ms && ms->proposals > 0) continue;  // been there: only noise can lead back
    bool is_noisy = false;
    for (const auto& p : noisy) is_noisy = is_noisy || p == s.probe;
    double score = 0;
    if (v.cur_ok) {
      if (s.delta_ms.n == 0 || is_noisy) continue;
      score = s.delta_ms.mean;
      // gpu_now -> gpu_queue that costs nothing measurable is taken too: a gpu_now that only
      // succeeds because of lucky timing would fail under other conditions.
      const bool safer = s.probe.kind == ProbeRequest::Kind::kMove &&
                         v.cur[s.probe.node] == Placement::kGpuNow &&
                         s.probe.to == Placement::kGpuQueue;
      if (safer && score <= min_gain * v.base) {
        score = std::min(score, -min_gain * v.base);
      }
      if (score > -min_gain * v.base) continue;
    } else {
      // The current mapping failed: any variant that ran beats it; rank by its own mean.
      if (!ms || ms->makespan_ms.n == 0) continue;
      score = ms->makespan_ms.mean;
    }
    if (!best || score < *best_score) {
      best = &s;
      *best_score = score;
    }
  }
  return best;
}

/// @brief Adds probe p to the joint moves when it is useful, not yet measured against the
/// current mapping, and not the same variant as one already added.
void consider(const CurrentView& v, const ProbeRequest& p, std::vector<ProbeRequest>* pairs) {
  if (!v.useful(p)) return;
  const auto m = v.o.apply(p);
  for (const auto& s : v.o.probes) {
    if (s.variant == *m) return;  // already measured against the current mapping
  }
  for (const auto& q : *pairs) {
    if (*v.o.apply(q) == *m) return;
  }
  pairs->push_back(p);
}

/// @brief Every GPU tool of `v` on gpu_now.
Mapping eager(Mapping v) {
  for (auto& pl : v) {
    if (pl == Placement::kGpuQueue) pl = Placement::kGpuNow;
  }
  return v;
}

/// @brief (3) The eager flavour of the current split and of every single move, and each
/// failed eager variant repaired by queueing the tools that ran out of VRAM.
void consider_queue_disciplines(const CurrentView& cv, std::vector<ProbeRequest>* pairs) {
  const Observation& o = cv.o;
  const Mapping& cur = cv.cur;
  auto variant = [](Mapping v) { return ProbeRequest::of(std::move(v)); };
  consider(cv, variant(eager(cur)), pairs);
  for (std::size_t i = 0; i < o.nodes.size(); ++i) {
    for (auto pl : o.nodes[i].options) {
      if (pl == cur[i]) continue;
      Mapping v = cur;
      v[i] = pl;
      v = eager(std::move(v));
      if (pl == Placement::kGpuQueue) v[i] = pl;  // keep the move itself
      consider(cv, variant(std::move(v)), pairs);
    }
  }
  for (const auto& s : o.probes) {
    if (s.failures == 0) continue;
    const MappingStat* ms = o.find_mapping(s.variant);
    if (!ms) continue;
    Mapping v = s.variant;
    bool changed = false;
    for (auto k : ms->failed_nodes) {
      if (v[k] == Placement::kGpuNow) {
        v[k] = Placement::kGpuQueue;
        changed = true;
      }
    }
    if (changed) consider(cv, variant(std::move(v)), pairs);
  }
}

/// @brief The joint moves that single ones cannot express, for when no single move or swap
/// helps.
std::vector<ProbeRequest> joint_moves(const CurrentView& v) {
  const Observation& o = v.o;
  // (1) A tool and its DAG successor moved together (a chain where moving either alone only
  //     shifts the wait). (2) A move that failed for lack of VRAM, repaired by moving another
  //     GPU tool to the CPU to make room.
  std::vector<ProbeRequest> pairs;
  for (std::size_t j = 0; j < o.nodes.size(); ++j) {
    for (std::size_t i : o.nodes[j].after) {
      for (auto pl : o.nodes[j].options) {
        consider(v, ProbeRequest::pair(i, pl, j, pl), &pairs);
      }
    }
  }
  for (const auto& s : o.probes) {
    if (s.failures == 0 || s.probe.kind != ProbeRequest::Kind::kMove) continue;
    for (std::size_t j = 0; j < o.nodes.size(); ++j) {
      if (j != s.probe.node && on_gpu(v.cur[j])) {
        consider(v, ProbeRequest::pair(s.probe.node, s.probe.to, j, Placement::kCpu), &pairs);
      }
    }
  }
  // (3) Under a VRAM budget the queue discipline matters as much as the side: a tool moved
  //     onto the GPU can block the FIFO for the small ones behind it. For every single move
  //     (and for the current split), try the eager flavour (every GPU tool on gpu_now), and
  //     repair each eager variant that failed by queueing the tools that ran out of VRAM.
  if (!v.ample) consider_queue_disciplines(v, &pairs);
  return pairs;
}

}  // namespace

Result<AgentAction> BuiltinAgent::act(const Observation& o) {
  AgentAction a;
  if (!o.current) {
    a.mapping = initial_mapping(o);
    a.reason = "start from the static profile: each tool on its faster standalone side";
    return a;
  }
  const Mapping& cur = *o.current;
  if (o.current_stat && o.current_stat->failures == 0 && !o.current_stat->protects_corunners()) {
    return protect_corunners(o);
  }
  const bool ample = vram_ample(o);
  const bool cur_ok =
      o.current_stat && o.current_stat->makespan_ms.n > 0 && o.current_stat->failures == 0;
  const double base =
      cur_ok ? o.current_stat->makespan_ms.mean : std::numeric_limits<double>::infinity();
  const CurrentView v{o, cur, ample, cur_ok, base};

  std::vector<ProbeRequest> unmeasured;
  std::vector<ProbeRequest> noisy;
  sort_hinted_probes(v, &unmeasured, &noisy);
  if (!unmeasured.empty()) {
    a.probes = unmeasured;
    a.reason = "measure " + std::to_string(unmeasured.size()) +
               " unmeasured or stale moves and swaps around the current mapping";
    return a;
  }
  // Re-measure only the noisy comparisons that might be improvements.
  const std::vector<ProbeRequest> worth = worth_remeasuring(o, noisy);
  if (!worth.empty()) {
    a.probes = worth;
    a.reason =
        "re-measure " + std::to_string(worth.size()) + " comparisons whose gain is within noise";
    return a;
  }

  // Choose the best significant improvement among measured, never-failing variants.
  double best_score = 0;
  const ProbeStat* best = best_improvement(v, noisy, options_.min_gain, &best_score);
  if (best) {
    a.mapping = best->variant;
    a.reason =
        describe(best->probe, o) + (cur_ok ? " saves " + fmt_ms(-best_score) + " of " + fmt_ms(base)
                                           : " runs where the current mapping failed");
    return a;
  }

  // No single move or swap helps: try the joint moves that single ones cannot express.
  const std::vector<ProbeRequest> pairs = joint_moves(v);
  if (!pairs.empty()) {
    a.probes = pairs;
    a.reason = "no single move or swap helps: measure " + std::to_string(pairs.size()) +
               " joint moves (DAG neighbours together, VRAM repairs)";
    return a;
  }
  a.done = true;
  a.mapping = cur;
  a.reason = cur_ok ? "no measured move, swap or joint move improves " + fmt_ms(base)
                    : "no alternative measured; keeping the current mapping";
  return a;
}

Result<PolicyResult> AgentPolicy::decide(TrialRunner& runner, const Context& ctx) {
  const PlacementProblem& p = runner.problem();
  Monitor monitor(runner, ctx, monitor_);
  PolicyResult r;
  std::optional<Mapping> final_mapping;
  for (int step = 0; step < max_steps_; ++step) {
    const Observation obs = monitor.observe();
    auto a = agent_->act(obs);
    if (!a) return a.error().wrap("agent '" + std::string(agent_->name()) + "'");
    for (auto& line : a->log) r.log.push_back(std::move(line));
    r.log.push_back("step " + std::to_string(step) + ": " + a->reason);
    if (a->mapping) {
      if (const Status s = p.validate(*a->mapping); !s.ok()) {
        monitor.reject("proposal rejected by the executor: " + s.error().what());
        r.log.push_back("  rejected: " + s.error().what());
        continue;
      }
    }
    if (a->done) {
      final_mapping = a->mapping ? a->mapping : monitor.current();
      break;
    }
    if (a->mapping) monitor.execute(*a->mapping);
    if (!a->probes.empty()) monitor.reprobe(a->probes);
    if (!a->mapping && a->probes.empty()) {
      final_mapping = monitor.current();
      break;
    }
  }
  if (!final_mapping) final_mapping = monitor.current();
  if (!final_mapping) {
    return Error("agent '" + std::string(agent_->name()) + "' never proposed a valid mapping");
  }
  const Observation last = monitor.observe();
  for (const MappingStat& s : last.mappings) {
    if (!s.protects_corunners()) r.excluded.push_back({s.mapping, s.predicted_breaches});
  }
  // The policy keeps the last word on the co-runners as the executor does on validity: a final
  // mapping predicted to break one gives way to the fastest measured one predicted not to.
  if (const MappingStat* s = last.find_mapping(*final_mapping); s && !s->protects_corunners()) {
    for (const MappingStat& alt : last.mappings) {
      if (alt.makespan_ms.n == 0 || alt.failures > 0 || !alt.protects_corunners()) continue;
      r.log.push_back("final mapping predicted to break " +
                      s->predicted_breaches.front().describe() +
                      ": kept the fastest measured mapping predicted to protect the co-runners");
      final_mapping = alt.mapping;
      break;
    }
  }
  r.mapping = *final_mapping;
  r.executions = runner.executions();
  return r;
}

}  // namespace corun::mapping

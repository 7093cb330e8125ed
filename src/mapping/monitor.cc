#include "corun/mapping/monitor.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "corun/core/rng.h"
#include "corun/mapping/guard.h"

namespace corun::mapping {

void RunningStat::add(double x) {
  ++n;
  const double d = x - mean;
  mean += d / static_cast<double>(n);
  m2 += d * (x - mean);
}

double RunningStat::stddev() const {
  return n >= 2 ? std::sqrt(std::max(0.0, m2 / static_cast<double>(n - 1))) : 0.0;
}

std::string_view to_string(Hint::Kind k) {
  switch (k) {
    case Hint::Kind::kUnmeasured:
      return "unmeasured";
    case Hint::Kind::kStale:
      return "stale";
    case Hint::Kind::kNoisy:
      return "noisy";
  }
  return "?";
}

std::optional<std::size_t> Observation::find(std::string_view id) const {
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    if (nodes[i].id == id) return i;
  }
  return std::nullopt;
}

namespace {

bool allowed(const NodeView& n, Placement p) {
  return std::find(n.options.begin(), n.options.end(), p) != n.options.end();
}

// The variant a probe yields from `current`, or nullopt with the reason.
std::optional<Mapping> apply_probe(const std::vector<NodeView>& nodes, const Mapping& current,
                                   const ProbeRequest& p, std::string* why) {
  auto fail = [&](std::string reason) -> std::optional<Mapping> {
    if (why) *why = std::move(reason);
    return std::nullopt;
  };
  if (p.kind == ProbeRequest::Kind::kVariant) {
    if (p.variant.size() != nodes.size()) return fail("variant probe must place every tool");
    for (std::size_t i = 0; i < nodes.size(); ++i) {
      if (!allowed(nodes[i], p.variant[i])) {
        return fail("variant probe: '" + nodes[i].id + "' may not run on " +
                    std::string(to_string(p.variant[i])));
      }
    }
    if (p.variant == current) return fail("variant probe equals the current mapping");
    return p.variant;
  }
  if (p.node >= nodes.size()) return fail("probe names no tool");
  Mapping v = current;
  const std::string& id = nodes[p.node].id;
  if (p.kind == ProbeRequest::Kind::kMove) {
    if (!allowed(nodes[p.node], p.to)) {
      return fail("probe: '" + id + "' may not run on " + std::string(to_string(p.to)));
    }
    if (current[p.node] == p.to) {
      return fail("probe: '" + id + "' is already on " + std::string(to_string(p.to)));
    }
    v[p.node] = p.to;
    return v;
  }
  if (p.other >= nodes.size() || p.other == p.node) return fail("probe needs two tools");
  const std::string& other = nodes[p.other].id;
  if (p.kind == ProbeRequest::Kind::kPair) {
    if (!allowed(nodes[p.node], p.to) || !allowed(nodes[p.other], p.other_to)) {
      return fail("pair probe: '" + id + "' or '" + other + "' may not take that placement");
    }
    if (current[p.node] == p.to || current[p.other] == p.other_to) {
      return fail("pair probe: both '" + id + "' and '" + other + "' must change placement");
    }
    v[p.node] = p.to;
    v[p.other] = p.other_to;
    return v;
  }
  if (current[p.node] == current[p.other]) {
    return fail("swap probe: '" + id + "' and '" + other + "' have the same placement");
  }
  std::swap(v[p.node], v[p.other]);
  if (!allowed(nodes[p.node], v[p.node]) || !allowed(nodes[p.other], v[p.other])) {
    return fail("swap probe: '" + id + "' and '" + other + "' cannot exchange placements");
  }
  return v;
}

std::string context_of(const ToolRun& r) {
  if (r.vram_pressure) return "vram_pressure";
  if (r.gpu_corunners == 0) return "alone";
  return "k=" + std::to_string(r.gpu_corunners);
}

nlohmann::json mapping_json(const Mapping& m, const std::vector<NodeView>& nodes) {
  nlohmann::json j = nlohmann::json::object();
  for (std::size_t i = 0; i < m.size() && i < nodes.size(); ++i) {
    j[nodes[i].id] = std::string(to_string(m[i]));
  }
  return j;
}

double round3(double x) { return std::round(x * 1000) / 1000; }

}  // namespace

std::optional<Mapping> Observation::apply(const ProbeRequest& probe) const {
  if (!current) return std::nullopt;
  return apply_probe(nodes, *current, probe, nullptr);
}

const MappingStat* Observation::find_mapping(const Mapping& m) const {
  for (const auto& s : mappings) {
    if (s.mapping == m) return &s;
  }
  return nullptr;
}

std::string describe(const ProbeRequest& p, const Observation& o) {
  const auto id = [&](std::size_t i) { return i < o.nodes.size() ? o.nodes[i].id : "?"; };
  switch (p.kind) {
    case ProbeRequest::Kind::kMove:
      return "move " + id(p.node) + " to " + std::string(to_string(p.to));
    case ProbeRequest::Kind::kSwap:
      return "swap " + id(p.node) + " and " + id(p.other);
    case ProbeRequest::Kind::kPair:
      return "move " + id(p.node) + " to " + std::string(to_string(p.to)) + " and " + id(p.other) +
             " to " + std::string(to_string(p.other_to));
    case ProbeRequest::Kind::kVariant: {
      std::string out = "set";
      for (std::size_t i = 0; i < p.variant.size() && i < o.nodes.size(); ++i) {
        if (o.current && i < o.current->size() && (*o.current)[i] == p.variant[i]) continue;
        out += " " + id(i) + "=" + std::string(to_string(p.variant[i]));
      }
      return out;
    }
  }
  return "?";
}

nlohmann::json to_json(const ProbeRequest& p, const Observation& o) {
  const auto id = [&](std::size_t i) { return i < o.nodes.size() ? o.nodes[i].id : "?"; };
  switch (p.kind) {
    case ProbeRequest::Kind::kMove:
      return {{"kind", "move"}, {"tool", id(p.node)}, {"to", std::string(to_string(p.to))}};
    case ProbeRequest::Kind::kSwap:
      return {{"kind", "swap"}, {"tool", id(p.node)}, {"with", id(p.other)}};
    case ProbeRequest::Kind::kPair:
      return {{"kind", "pair"},
              {"tool", id(p.node)},
              {"to", std::string(to_string(p.to))},
              {"with", id(p.other)},
              {"with_to", std::string(to_string(p.other_to))}};
    case ProbeRequest::Kind::kVariant:
      return {{"kind", "variant"}, {"mapping", mapping_json(p.variant, o.nodes)}};
  }
  return nullptr;
}

nlohmann::json to_json(const Observation& o) {
  nlohmann::json j;
  j["scenario"] = o.scenario;
  j["device"] = o.device;
  j["vram_budget_gb"] = round3(o.vram_budget_gb);
  j["round"] = o.round;
  j["executions"] = o.executions;
  j["noise_cv"] = round3(o.noise_cv);
  nlohmann::json tools = nlohmann::json::array();
  for (const auto& n : o.nodes) {
    nlohmann::json t = {{"id", n.id},
                        {"tool", n.tool},
                        {"cpu_ms", round3(n.cpu_ms)},
                        {"vram_gb", round3(n.vram_gb)},
                        {"profile", std::string(to_string(n.preference))}};
    t["gpu_ms"] = n.gpu_ms ? nlohmann::json(round3(*n.gpu_ms)) : nlohmann::json(nullptr);
    nlohmann::json after = nlohmann::json::array();
    for (auto a : n.after) after.push_back(o.nodes[a].id);
    t["after"] = after;
    nlohmann::json opts = nlohmann::json::array();
    for (auto p : n.options) opts.push_back(std::string(to_string(p)));
    t["options"] = opts;
    tools.push_back(t);
  }
  j["tools"] = tools;
  auto stat_json = [&](const MappingStat& s) {
    nlohmann::json sj = {{"mapping", mapping_json(s.mapping, o.nodes)},
                         {"mean_ms", round3(s.makespan_ms.mean)},
                         {"runs", s.makespan_ms.n},
                         {"failures", s.failures}};
    if (!s.protects_corunners()) {
      nlohmann::json b = nlohmann::json::array();
      for (const auto& x : s.predicted_breaches) b.push_back(x.describe());
      sj["predicted_corunner_breaches"] = b;
    }
    return sj;
  };
  j["current"] = o.current_stat ? stat_json(*o.current_stat) : nlohmann::json(nullptr);
  nlohmann::json measured = nlohmann::json::array();
  for (std::size_t k = 0; k < o.mappings.size() && k < 5; ++k) {
    measured.push_back(stat_json(o.mappings[k]));
  }
  j["fastest_measured"] = measured;
  nlohmann::json stats = nlohmann::json::array();
  for (const auto& s : o.tool_stats) {
    stats.push_back({{"id", o.nodes[s.node].id},
                     {"placement", std::string(to_string(s.placement))},
                     {"context", s.context},
                     {"mean_ms", round3(s.duration_ms.mean)},
                     {"std_ms", round3(s.duration_ms.stddev())},
                     {"runs", s.duration_ms.n}});
  }
  j["tool_stats"] = stats;
  nlohmann::json probes = nlohmann::json::array();
  for (const auto& p : o.probes) {
    probes.push_back({{"probe", to_json(p.probe, o)},
                      {"mean_delta_ms", round3(p.delta_ms.mean)},
                      {"std_delta_ms", round3(p.delta_ms.stddev())},
                      {"pairs", p.delta_ms.n},
                      {"variant_failures", p.failures}});
  }
  j["probes"] = probes;
  nlohmann::json hints = nlohmann::json::array();
  for (const auto& h : o.hints) {
    nlohmann::json hj = {{"kind", std::string(to_string(h.kind))}, {"text", h.text}};
    if (h.probe) hj["probe"] = to_json(*h.probe, o);
    hints.push_back(hj);
  }
  j["hints"] = hints;
  if (!o.last_error.empty()) j["last_error"] = o.last_error;
  return j;
}

Monitor::Monitor(TrialRunner& runner, const Context& ctx, MonitorOptions options)
    : runner_(&runner), problem_(&runner.problem()), ctx_(ctx), options_(options) {
  const PlacementProblem& p = *problem_;
  for (std::size_t i = 0; i < p.size(); ++i) {
    NodeView v;
    v.id = p.id(i);
    v.tool = p.tool(i).name;
    v.after = p.preds(i);
    v.options.assign(p.options(i).begin(), p.options(i).end());
    const ToolCost& c = p.cost(i);
    v.cpu_ms = c.cpu_s * 1e3;
    if (c.has_gpu) v.gpu_ms = c.gpu_s() * 1e3;
    v.vram_gb = c.vram_bytes / 1e9;
    v.preference = c.has_gpu ? classify_speedup(c.cpu_s / c.gpu_s(), ProfileThresholds{})
                             : Preference::kNeutral;
    nodes_.push_back(std::move(v));
  }
}

void Monitor::record(const Mapping& m, const RunResult& r, bool proposal) {
  auto it = std::find_if(mappings_.begin(), mappings_.end(),
                         [&](const MappingStat& s) { return s.mapping == m; });
  if (it == mappings_.end()) {
    mappings_.push_back(MappingStat{m, {}, 0, {}, 0, 0, {}});
    it = mappings_.end() - 1;
  }
  if (r.failed) {
    ++it->failures;
    for (std::size_t i = 0; i < r.tools.size(); ++i) {
      if (r.tools[i].status == ToolRun::Status::kFailed &&
          std::find(it->failed_nodes.begin(), it->failed_nodes.end(), i) ==
              it->failed_nodes.end()) {
        it->failed_nodes.push_back(i);
      }
    }
  } else {
    it->makespan_ms.add(r.makespan_ms);
  }
  if (proposal) ++it->proposals;
  it->last_round = round_;
  if (const CoRunnerGuard* g = problem_->guard(); g != nullptr && !r.failed) {
    auto predicted = predicted_breaches(*g, r.burst);
    if (worst_excess(predicted) > worst_excess(it->predicted_breaches)) {
      it->predicted_breaches = std::move(predicted);
    }
  }
  for (std::size_t i = 0; i < r.tools.size(); ++i) {
    const ToolRun& t = r.tools[i];
    if (t.status != ToolRun::Status::kDone) continue;
    const std::string ctx = context_of(t);
    auto st = std::find_if(tool_stats_.begin(), tool_stats_.end(), [&](const ToolStat& s) {
      return s.node == i && s.placement == t.placement && s.context == ctx;
    });
    if (st == tool_stats_.end()) {
      tool_stats_.push_back(ToolStat{i, t.placement, ctx, {}, 0});
      st = tool_stats_.end() - 1;
    }
    st->duration_ms.add(t.duration_ms());
    st->last_round = round_;
  }
}

RunResult Monitor::execute(const Mapping& mapping) {
  ++round_;
  round_ctx_ = ctx_.derived({static_cast<std::uint64_t>(round_)});
  RunResult r = runner_->run(round_ctx_, mapping);
  record(mapping, r, true);
  current_ = mapping;
  round_probed_ = false;
  round_baseline_ms_ = r.makespan_ms;
  round_baseline_failed_ = r.failed;
  last_error_.clear();
  return r;
}

std::optional<Mapping> Monitor::apply(const ProbeRequest& p, std::string* why) const {
  if (!current_) {
    if (why) *why = "no current mapping to probe around: propose one first";
    return std::nullopt;
  }
  return apply_probe(nodes_, *current_, p, why);
}

ProbeStat& Monitor::probe_stat(const Mapping& baseline, const Mapping& variant,
                               const ProbeRequest& p) {
  for (auto& s : probes_) {
    if (s.baseline == baseline && s.variant == variant) return s;
  }
  probes_.push_back(ProbeStat{baseline, variant, p, {}, 0, 0, 0, 0});
  return probes_.back();
}

void Monitor::reprobe(std::span<const ProbeRequest> probes) {
  std::vector<std::pair<ProbeRequest, Mapping>> todo;
  std::string errors;
  for (const auto& p : probes) {
    std::string why;
    auto v = apply(p, &why);
    if (!v) {
      errors += (errors.empty() ? "" : "; ") + why;
      continue;
    }
    const bool dup =
        std::any_of(todo.begin(), todo.end(), [&](const auto& t) { return t.second == *v; });
    if (!dup) todo.emplace_back(p, std::move(*v));
  }
  last_error_ = errors;
  if (todo.empty()) return;
  if (round_probed_) {
    // The current mapping's conditions were used up by earlier probes: open a new round and
    // re-measure the baseline in it, so that every pair shares one set of conditions.
    ++round_;
    round_ctx_ = ctx_.derived({static_cast<std::uint64_t>(round_)});
    const RunResult base = runner_->run(round_ctx_, *current_);
    record(*current_, base, false);
    round_baseline_ms_ = base.makespan_ms;
    round_baseline_failed_ = base.failed;
  }
  round_probed_ = true;
  for (const auto& [p, variant] : todo) {
    const RunResult r = runner_->run(round_ctx_, variant);
    record(variant, r, false);
    ProbeStat& s = probe_stat(*current_, variant, p);
    s.last_round = round_;
    s.last_baseline_ms = round_baseline_ms_;
    s.last_variant_ms = r.makespan_ms;
    if (r.failed) {
      ++s.failures;
    } else if (!round_baseline_failed_) {
      s.delta_ms.add(r.makespan_ms - round_baseline_ms_);
    }
  }
}

double Monitor::noise_cv() const {
  // Pooled relative spread of repeated runs of the same mapping (each repeat is a new round,
  // so this is run-to-run variation under changing conditions).
  double num = 0, den = 0;
  for (const auto& s : mappings_) {
    if (s.makespan_ms.n < 2 || s.makespan_ms.mean <= 0) continue;
    const double cv = s.makespan_ms.stddev() / s.makespan_ms.mean;
    const auto dof = static_cast<double>(s.makespan_ms.n - 1);
    num += dof * cv * cv;
    den += dof;
  }
  return den > 0 ? std::sqrt(num / den) : options_.prior_noise_cv;
}

Observation Monitor::observe() const {
  Observation o;
  const PlacementProblem& p = *problem_;
  o.scenario = p.scenario().name;
  o.device = p.device().name;
  o.vram_budget_gb = p.vram_budget_bytes() / 1e9;
  o.nodes = nodes_;
  o.round = round_;
  o.executions = runner_->executions();
  o.current = current_;
  o.mappings = mappings_;
  std::stable_sort(o.mappings.begin(), o.mappings.end(),
                   [](const MappingStat& a, const MappingStat& b) {
                     const bool ra = a.makespan_ms.n > 0, rb = b.makespan_ms.n > 0;
                     if (ra != rb) return ra;
                     return a.makespan_ms.mean < b.makespan_ms.mean;
                   });
  o.tool_stats = tool_stats_;
  o.noise_cv = noise_cv();
  o.last_error = last_error_;
  if (!current_) {
    o.hints.push_back(
        {Hint::Kind::kUnmeasured, std::nullopt, "nothing measured yet: propose a first mapping"});
    return o;
  }
  for (const auto& s : mappings_) {
    if (s.mapping == *current_) o.current_stat = s;
  }
  for (const auto& s : probes_) {
    if (s.baseline == *current_) o.probes.push_back(s);
  }
  const double base_ms =
      o.current_stat && o.current_stat->makespan_ms.n > 0 ? o.current_stat->makespan_ms.mean : 0;
  // Every single move and every GPU<->CPU swap around the current mapping is a question the
  // measurements may or may not answer yet.
  std::vector<ProbeRequest> candidates;
  const std::size_t n = nodes_.size();
  for (std::size_t i = 0; i < n; ++i) {
    for (auto pl : nodes_[i].options) {
      if (pl != (*current_)[i]) candidates.push_back(ProbeRequest::move(i, pl));
    }
  }
  for (std::size_t i = 0; i < n; ++i) {
    for (std::size_t k = i + 1; k < n; ++k) {
      if (on_gpu((*current_)[i]) == on_gpu((*current_)[k])) continue;
      const ProbeRequest sw = ProbeRequest::swap(i, k);
      if (apply_probe(nodes_, *current_, sw, nullptr)) candidates.push_back(sw);
    }
  }
  for (const auto& c : candidates) {
    const Mapping v = *apply_probe(nodes_, *current_, c, nullptr);
    const ProbeStat* s = nullptr;
    for (const auto& ps : o.probes) {
      if (ps.variant == v) s = &ps;
    }
    const std::string what = describe(c, o);
    if (!s) {
      o.hints.push_back({Hint::Kind::kUnmeasured, c,
                         what + ": not measured against the "
                                "current mapping"});
    } else if (round_ - s->last_round > options_.stale_rounds) {
      o.hints.push_back(
          {Hint::Kind::kStale, c,
           what + ": last measured " + std::to_string(round_ - s->last_round) + " rounds ago"});
    }
  }
  // Any comparison against the current mapping (moves, swaps, pairs) whose paired difference
  // is smaller than two standard errors could be luck. With one pair the spread is unknown:
  // assume two independent runs at the monitor's noise estimate.
  for (const auto& s : o.probes) {
    if (s.delta_ms.n == 0 || s.delta_ms.n >= static_cast<std::uint64_t>(options_.max_repeats)) {
      continue;
    }
    const double se = s.delta_ms.n >= 2 ? s.delta_ms.stddev() / std::sqrt(double(s.delta_ms.n))
                                        : std::sqrt(2.0) * o.noise_cv * base_ms;
    if (std::abs(s.delta_ms.mean) < 2 * se) {
      char buf[160];
      std::snprintf(buf, sizeof buf, ": delta %.2f ms is within noise (+-%.2f ms, %llu pair%s)",
                    s.delta_ms.mean, 2 * se, static_cast<unsigned long long>(s.delta_ms.n),
                    s.delta_ms.n == 1 ? "" : "s");
      o.hints.push_back({Hint::Kind::kNoisy, s.probe, describe(s.probe, o) + buf});
    }
  }
  for (const auto& ts : tool_stats_) {
    const auto& d = ts.duration_ms;
    if (d.n >= 3 && d.mean > 0 && d.stddev() / d.mean > 3 * std::max(o.noise_cv, 0.01)) {
      char buf[200];
      std::snprintf(buf, sizeof buf, "%s on %s (%s) varies by %.0f %% between runs",
                    nodes_[ts.node].id.c_str(), std::string(to_string(ts.placement)).c_str(),
                    ts.context.c_str(), 100 * d.stddev() / d.mean);
      o.hints.push_back({Hint::Kind::kNoisy, std::nullopt, buf});
    }
  }
  return o;
}

}  // namespace corun::mapping

// Parsing of a workload's timeline: its duration, control interval and events (workload events
// and drift events).
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "corun/core/strings.h"
#include "corun/core/yaml.h"
#include "corun/spec/workload.h"
#include "workload_internal.h"

namespace corun::workload_detail {

namespace {

// Lowest power limit an event may set, as a fraction of TDP: drivers refuse limits far below
// the board's default (an RTX 3090 accepts 100 W of its 350 W, an A100 150 W of 400 W).
constexpr double kMinPowerCapFraction = 0.2;

// A drift event's body: `interference: {sm_util, bandwidth_util}` or null, `power_cap_w: W` or
// null, `perturb: SEED` or null. Returns false when it is not one (then it is a workload
// event).
bool parse_drift(const YamlField& f, const std::string& kind, const Workload& w,
                 TimelineEvent& e) {
  const YamlField body = f[kind];
  const bool null = !body.present();
  if (kind == "interference") {
    e.kind = TimelineEvent::Kind::kInterference;
    if (null) return true;  // the co-tenant leaves
    if (!body.expect_map()) return true;
    body.check_keys({"sm_util", "bandwidth_util"});
    Interference i;
    i.sm_util = body.number_at("sm_util", 0, 1, false).value_or(0);
    i.bandwidth_util = body.number_at("bandwidth_util", 0, 1, false).value_or(0);
    if (!body["sm_util"].present() && !body["bandwidth_util"].present()) {
      body.error("an interference needs sm_util or bandwidth_util (or null: the co-tenant leaves)");
    }
    e.interference = i;
    return true;
  }
  if (kind == "perturb") {
    e.kind = TimelineEvent::Kind::kPerturb;
    if (null) return true;  // back to the catalog's values
    const auto seed = body.integer(1, (1LL << 53));
    e.perturb_seed = seed ? static_cast<std::uint64_t>(*seed) : 0;
    return true;
  }
  if (kind == "power_cap_w") {
    e.kind = TimelineEvent::Kind::kPowerCap;
    if (null) return true;  // back to TDP
    const double tdp = w.device.tdp_w > 0 ? w.device.tdp_w : 1e4;
    e.power_cap_w = body.number(kMinPowerCapFraction * tdp, tdp);
    return true;
  }
  return false;
}

// The model an event names, or nullopt (after reporting) when the workload has none of that
// name.
std::optional<std::size_t> find_event_model(const YamlField& name_field, const Workload& w) {
  const auto name = name_field.string();
  if (!name) return std::nullopt;
  const auto i = w.find_model(*name);
  if (!i) {
    std::vector<std::string> names;
    for (const auto& m : w.models) names.push_back(m.name);
    name_field.error("no model '" + *name + "' in the workload" + did_you_mean(*name, names));
  }
  return i;
}

// `demand: {model, fps | rps | concurrency}`: model `m`'s new demand.
void parse_demand_event(const YamlField& body, const ModelSpec& m, TimelineEvent& e) {
  e.kind = TimelineEvent::Kind::kDemand;
  e.demand = m.demand;
  const char* rate = rate_key(m.arch.family);
  body.check_keys({"model", rate, "concurrency"});
  if (!body[rate].present() && !body["concurrency"].present()) {
    body[rate].error("missing required field (or concurrency)");
  }
  parse_demand_mode(body, m.arch.family, e.demand, false);
}

// `sla: {model, latency_ms_p95, ...}`: model `m`'s SLA with the bounds given changed.
void parse_sla_event(const YamlField& body, const ModelSpec& m, TimelineEvent& e) {
  const bool llm = m.arch.family == ModelFamily::kLlm;
  e.kind = TimelineEvent::Kind::kSla;
  e.sla = m.sla;
  if (llm) {
    body.check_keys({"model", "latency_ms_p95", "ttft_ms_p95", "tpot_ms_p95", "min_throughput"});
    if (auto v = body.number_at("ttft_ms_p95", 1e-3, kMaxSlaMs, false)) e.sla.ttft_ms_p95 = v;
    if (auto v = body.number_at("tpot_ms_p95", 1e-3, kMaxSlaMs, false)) e.sla.tpot_ms_p95 = v;
  } else {
    body.check_keys({"model", "latency_ms_p95", "min_throughput"});
  }
  if (auto v = body.number_at("latency_ms_p95", 1e-3, kMaxSlaMs, false)) {
    e.sla.latency_ms_p95 = v;
  }
  if (auto v = body.number_at("min_throughput", 0, kMaxRate * 1e3, false)) {
    e.sla.min_throughput = v;
  }
}

// `context: {model, prompt_tokens, output_tokens}`: LLM `m`'s new request lengths. Returns
// false (after reporting) when `m` is not an LLM.
bool parse_context_event(const YamlField& body, const ModelSpec& m, TimelineEvent& e) {
  const bool llm = m.arch.family == ModelFamily::kLlm;
  e.kind = TimelineEvent::Kind::kContext;
  if (!llm) {
    body.error("context events apply to LLMs; '" + m.name + "' is " +
               std::string(to_string(m.arch.family)));
    return false;
  }
  body.check_keys({"model", "prompt_tokens", "output_tokens"});
  e.demand = m.demand;
  if (auto v = body.integer_at("prompt_tokens", 1, kMaxTokens, false)) {
    e.demand.prompt_tokens = static_cast<int>(*v);
  }
  if (auto v = body.integer_at("output_tokens", 1, kMaxTokens, false)) {
    e.demand.output_tokens = static_cast<int>(*v);
  }
  return true;
}

// The body of a demand, sla or context event, `{model: NAME, ...}`. Returns false (after
// reporting) when it is not a valid one.
bool parse_model_event(const std::string& kind, const YamlField& body, const Workload& w,
                       TimelineEvent& e) {
  if (!body.expect_map()) return false;
  const YamlField model_field = body["model"];
  if (!model_field.present()) {
    model_field.error("missing required field");
    return false;
  }
  const auto i = find_event_model(model_field, w);
  if (!i) return false;
  e.model = *i;
  const ModelSpec& m = w.models[*i];
  if (m.trace && (kind == "demand" || kind == "context")) {
    body.error("model '" + m.name + "' replays its demand from the trace '" + m.trace->file +
               "': " + kind + " events do not apply to it");
    return false;
  }
  if (kind == "demand") {
    parse_demand_event(body, m, e);
  } else if (kind == "sla") {
    parse_sla_event(body, m, e);
  } else {  // context
    return parse_context_event(body, m, e);
  }
  return true;
}

// One event: `at_s` plus exactly one of arrive / depart / demand / sla / context (workload
// events) or interference / power_cap_w (drift events, applied to the testbed only).
void parse_event(const YamlField& f, Workload& w) {
  if (!f.expect_map()) return;
  static const std::vector<std::string> kKinds = {
      "arrive", "depart", "demand", "sla", "context", "interference", "power_cap_w", "perturb"};
  std::vector<std::string> known = kKinds;
  known.emplace_back("at_s");
  f.check_keys(known);
  TimelineEvent e;
  e.line = f.line();
  const auto at = f.number_at("at_s", 0, kMaxDurationS, true);
  if (at) e.at_s = *at;
  std::vector<std::string> kinds;
  for (const auto& k : kKinds) {
    if (has_key(f, k)) kinds.push_back(k);
  }
  if (kinds.size() != 1) {
    f.error("an event needs exactly one of " + join(kKinds, ", ") + " (got " +
            std::to_string(kinds.size()) + ")");
    return;
  }
  if (parse_drift(f, kinds[0], w, e)) {
    w.timeline.events.push_back(e);
    return;
  }
  const std::string kind = kinds[0];
  const YamlField body = f[kind];
  if (kind == "arrive" || kind == "depart") {
    e.kind = kind == "arrive" ? TimelineEvent::Kind::kArrive : TimelineEvent::Kind::kDepart;
    const auto i = find_event_model(body, w);
    if (!i) return;
    e.model = *i;
  } else if (!parse_model_event(kind, body, w, e)) {
    return;
  }
  w.timeline.events.push_back(e);
}

}  // namespace

void parse_timeline(const YamlField& t, Workload& w) {
  if (!t.present()) return;
  if (!t.expect_map()) return;
  t.check_keys({"duration_s", "interval_s", "events"});
  w.timeline.duration_s = t.number_at("duration_s", 1e-3, kMaxDurationS, true).value_or(0);
  w.timeline.interval_s = t.number_at("interval_s", 0.1, 3600, false).value_or(10);
  const YamlField events = t["events"];
  if (events.present() && events.expect_sequence(true)) {
    for (std::size_t i = 0; i < events.size(); ++i) parse_event(events.at(i), w);
  }
  for (const auto& e : w.timeline.events) {
    if (w.timeline.duration_s > 0 && e.at_s > w.timeline.duration_s) {
      t.error("event at " + format_number(e.at_s) + " s (line " + std::to_string(e.line) +
              ") is after the end of the timeline (" + format_number(w.timeline.duration_s) +
              " s)");
    }
  }
  std::stable_sort(w.timeline.events.begin(), w.timeline.events.end(),
                   [](const auto& a, const auto& b) { return a.at_s < b.at_s; });
}

}  // namespace corun::workload_detail

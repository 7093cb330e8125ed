// The workload's types: the names of timeline events, a model's local configurations and its
// plan key, the node's layout count, and the demand a trace replays.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "corun/core/check.h"
#include "corun/core/strings.h"
#include "corun/spec/workload.h"

namespace corun {

std::string_view to_string(TimelineEvent::Kind k) {
  switch (k) {
    case TimelineEvent::Kind::kArrive:
      return "arrive";
    case TimelineEvent::Kind::kDepart:
      return "depart";
    case TimelineEvent::Kind::kDemand:
      return "demand";
    case TimelineEvent::Kind::kSla:
      return "sla";
    case TimelineEvent::Kind::kContext:
      return "context";
    case TimelineEvent::Kind::kInterference:
      return "interference";
    case TimelineEvent::Kind::kPowerCap:
      return "power_cap";
    case TimelineEvent::Kind::kPerturb:
      return "perturb";
  }
  return "?";
}

std::size_t ModelSpec::local_config_count() const {
  std::size_t n = 1;
  for (const auto& k : knobs) n *= k.values.size();
  return n;
}

Settings ModelSpec::settings(std::size_t index) const {
  Settings s = base;
  for (std::size_t k = knobs.size(); k-- > 0;) {
    const auto& spec = knobs[k];
    s.set(spec.id, spec.values[index % spec.values.size()]);
    index /= spec.values.size();
  }
  return s;
}

std::string ModelSpec::describe(std::size_t index) const {
  const Settings s = settings(index);
  std::string out;
  for (const auto& k : knobs) {
    if (!out.empty()) out += ",";
    out += knob_decl(k.id).name + "=" + format_knob_value(k.id, s.get(k.id));
  }
  return out;
}

std::string ModelSpec::plan_key() const {
  std::string out = arch.name;
  auto add = [&out](char tag, double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%c%.17g", tag, v);
    out += buf;
  };
  for (const auto& k : knobs) {
    add('k', static_cast<double>(k.id));
    for (const double v : k.values) add(',', v);
  }
  for (const auto& decl : knob_decls()) add('b', base.get(decl.id));
  for (const double v : {demand.fps, demand.rps, static_cast<double>(demand.prompt_tokens),
                         static_cast<double>(demand.output_tokens),
                         static_cast<double>(demand.concurrency), demand.arrival_cv}) {
    add('d', v);
  }
  for (const auto& bound : {sla.latency_ms_p95, sla.ttft_ms_p95, sla.tpot_ms_p95,
                            sla.min_throughput}) {
    if (bound) {
      add('s', *bound);
    } else {
      out += "s-";  // absent, distinct from any value
    }
  }
  // Streams change the arrival process; a model without them keeps the key it always had.
  if (!streams.empty()) add('n', static_cast<double>(streams.size()));
  add('w', weight);
  add('a', active ? 1 : 0);
  return out;
}

Result<std::size_t> ModelSpec::find_config(
    const std::vector<std::pair<std::string, std::string>>& assignments) const {
  std::vector<std::size_t> digit(knobs.size(), 0);
  for (const auto& [knob, text] : assignments) {
    std::vector<std::string> searched;
    for (const auto& k : knobs) searched.push_back(knob_decl(k.id).name);
    std::size_t pos = knobs.size();
    for (std::size_t i = 0; i < knobs.size(); ++i) {
      if (knob_decl(knobs[i].id).name == knob) pos = i;
    }
    if (pos == knobs.size()) {
      return Error("model '" + name + "' has no searched knob '" + knob + "'" +
                   did_you_mean(knob, searched) + " (searched: " + join(searched, ", ") + ")");
    }
    const auto& spec = knobs[pos];
    std::vector<std::string> allowed;
    bool found = false;
    for (std::size_t v = 0; v < spec.values.size(); ++v) {
      const std::string shown = format_knob_value(spec.id, spec.values[v]);
      allowed.push_back(shown);
      bool match = shown == text;
      if (!match && knob_decl(spec.id).categorical == false) {
        char* end = nullptr;
        const double x = std::strtod(text.c_str(), &end);
        match = !text.empty() && end == text.c_str() + text.size() &&
                std::fabs(x - spec.values[v]) <= 1e-9 * std::max(1.0, std::fabs(x));
      }
      if (match) {
        digit[pos] = v;
        found = true;
      }
    }
    if (!found) {
      return Error("model '" + name + "': " + knob + "=" + text + " is not one of the workload's " +
                   "values (" + join(allowed, ", ") + ")");
    }
  }
  std::size_t index = 0;
  for (std::size_t i = 0; i < knobs.size(); ++i) index = index * knobs[i].values.size() + digit[i];
  return index;
}

std::optional<std::size_t> Workload::find_model(std::string_view name) const {
  for (std::size_t i = 0; i < models.size(); ++i) {
    if (models[i].name == name) return i;
  }
  return std::nullopt;
}

std::size_t NodeSpec::layout_count() const {
  std::size_t n = 1;
  for (const auto& o : options) {
    n *= std::max<std::size_t>(1, o.size());
    if (n > (std::size_t{1} << 32)) break;  // far past any limit; never overflows
  }
  return n;
}

Workload Workload::prefix(std::size_t n) const {
  Workload w = *this;
  if (n < w.models.size()) w.models.resize(n);
  return w;
}

Demand TraceDemand::demand(double from_s, double to_s, const Demand& before) const {
  CORUN_CHECK(trace != nullptr);
  const TraceWindow win = trace->window(start_s + from_s, start_s + to_s);
  Demand d = before;
  d.fps = 0;
  d.concurrency = 0;
  d.rps = std::max(kMinRps, win.rps * scale);
  if (win.requests > 0) {
    d.prompt_tokens = std::max(1, static_cast<int>(std::lround(win.mean_context_tokens)));
    d.output_tokens = std::max(1, static_cast<int>(std::lround(win.mean_generated_tokens)));
    d.arrival_cv = win.arrival_cv;
  }
  return d;
}

Demand TraceDemand::initial(double interval_s) const {
  Demand lengths;
  lengths.prompt_tokens = 1;
  lengths.output_tokens = 1;
  // Every request before the start (the trace's first arrives at 0 < start_s) gives lengths
  // should the last interval before it have none.
  if (start_s > 0) lengths = demand(-start_s, 0, lengths);
  return demand(-std::min(interval_s, start_s), 0, lengths);
}

std::vector<Demand> TraceDemand::intervals(double interval_s, std::size_t count) const {
  std::vector<Demand> out;
  out.reserve(count);
  Demand d = initial(interval_s);
  for (std::size_t k = 0; k < count; ++k) {
    const double from = static_cast<double>(k) * interval_s;
    d = demand(from, from + interval_s, d);
    out.push_back(d);
  }
  return out;
}

}  // namespace corun

// Parsing of a workload's `models` entries: catalog model, knobs, demand, SLA, telemetry source
// and camera streams.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "corun/core/atomic_file.h"
#include "corun/core/strings.h"
#include "corun/core/yaml.h"
#include "corun/spec/workload.h"
#include "workload_internal.h"

namespace corun::workload_detail {

namespace {

bool valid_name(const std::string& s) {
  if (s.empty() || s.size() > 64) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.';
  });
}

bool family_in(ModelFamily f, const std::vector<ModelFamily>& fs) {
  return std::find(fs.begin(), fs.end(), f) != fs.end();
}

std::string families_text(const std::vector<ModelFamily>& fs) {
  std::vector<std::string> names;
  for (auto f : fs) names.emplace_back(to_string(f));
  return join(names, ", ");
}

// One knob value: a precision name or a number in the knob's declared range.
std::optional<double> parse_knob_value(const YamlField& f, const KnobDecl& decl,
                                       const ModelArch& arch) {
  if (decl.categorical) {
    if (!f.is_scalar()) {
      f.error("expected a precision name (" + join(precision_names(), ", ") + ")");
      return std::nullopt;
    }
    const auto p = parse_precision(f.node().Scalar());
    if (!p) {
      f.error("unknown precision '" + f.node().Scalar() + "'" +
              did_you_mean(f.node().Scalar(), precision_names()));
      return std::nullopt;
    }
    if (std::find(arch.precisions.begin(), arch.precisions.end(), *p) == arch.precisions.end()) {
      std::vector<std::string> have;
      for (auto q : arch.precisions) have.emplace_back(to_string(q));
      f.error("model '" + arch.name + "' has no " + std::string(to_string(*p)) +
              " variant (has: " + join(have, ", ") + ")");
      return std::nullopt;
    }
    return static_cast<double>(static_cast<int>(*p));
  }
  std::optional<double> v;
  if (decl.integer) {
    const auto i = f.integer(static_cast<long long>(decl.min), static_cast<long long>(decl.max));
    if (i) v = static_cast<double>(*i);
  } else {
    v = f.number(decl.min, decl.max);
  }
  if (v && decl.id == KnobId::kImgsz && static_cast<long long>(*v) % 32 != 0) {
    f.error("imgsz must be a multiple of 32, got " + format_number(*v));
    return std::nullopt;
  }
  return v;
}

void parse_knobs(const YamlField& knobs, ModelSpec& m) {
  if (!knobs.present()) return;
  if (!knobs.expect_map()) return;
  knobs.check_keys(knob_names());
  double configs = 1;
  for (const auto& key : knobs.keys()) {
    const auto id = find_knob(key);
    if (!id) continue;  // reported by check_keys
    const KnobDecl& decl = knob_decl(*id);
    const YamlField f = knobs[key];
    if (!family_in(m.arch.family, decl.families)) {
      f.error("knob '" + key + "' does not apply to " + std::string(to_string(m.arch.family)) +
              " model '" + m.arch.name + "' (applies to: " + families_text(decl.families) + ")");
      continue;
    }
    std::vector<double> values;
    if (f.is_sequence()) {
      if (!f.expect_sequence()) continue;
      if (f.size() > kMaxKnobValues) {
        f.error("too many values (" + std::to_string(f.size()) + ", at most " +
                std::to_string(kMaxKnobValues) + ")");
        continue;
      }
      for (std::size_t i = 0; i < f.size(); ++i) {
        const YamlField e = f.at(i);
        const auto v = parse_knob_value(e, decl, m.arch);
        if (!v) continue;
        if (std::find(values.begin(), values.end(), *v) != values.end()) {
          e.error("duplicate value " + format_knob_value(*id, *v));
          continue;
        }
        values.push_back(*v);
      }
    } else {
      const auto v = parse_knob_value(f, decl, m.arch);
      if (v) values.push_back(*v);
    }
    if (values.empty()) continue;
    configs *= static_cast<double>(values.size());
    if (values.size() == 1) {
      m.base.set(*id, values[0]);  // a fixed value: not searched
    } else {
      m.knobs.push_back(KnobSpec{*id, std::move(values)});
    }
  }
  if (configs > kMaxLocalConfigs) {
    knobs.error("too many local configurations (" + format_number(configs) + ", at most " +
                format_number(kMaxLocalConfigs) + ")");
    m.knobs.clear();
  }
}

// `demand: {trace: FILE, scale: S, start_s: T}`: the trace is read here, once; start_s is
// checked against the timeline in resolve_traces(), which also sets the initial demand.
void parse_trace_demand(const YamlField& d, ModelSpec& m) {
  d.check_keys({"trace", "scale", "start_s"});
  if (m.arch.family != ModelFamily::kLlm) {
    d["trace"].error("a trace replays LLM requests (prompt and output tokens); '" + m.name +
                     "' is " + std::string(to_string(m.arch.family)) + ": give " +
                     rate_key(m.arch.family) + " or concurrency");
    return;
  }
  const auto file = d.string_at("trace", true);
  const auto scale = d.number_at("scale", 1e-6, kMaxTraceScale, false);
  const auto start = d.number_at("start_s", 0, kMaxDurationS, false);
  if (!file) return;
  if (file->empty()) {
    d["trace"].error("must name a trace file (TIMESTAMP,ContextTokens,GeneratedTokens)");
    return;
  }
  TraceDemand t;
  t.file = *file;
  t.path = std::filesystem::path(*file);
  if (t.path.is_relative()) t.path = std::filesystem::path(d.file()).parent_path() / t.path;
  t.scale = scale.value_or(1);
  t.start_s = start.value_or(-1);  // -1: one control interval, set by resolve_traces()
  auto text = read_file(t.path);
  if (!text) {
    d["trace"].error("cannot read the trace: " + text.error().what());
    return;
  }
  CORUN_CHECK(d.diagnostics() != nullptr);
  auto trace = DemandTrace::parse(*text, t.path.string(), *d.diagnostics());
  if (!trace) return;
  t.trace = std::make_shared<const DemandTrace>(std::move(*trace));
  m.trace = std::move(t);
}

// An optional upper bound on a request's length (`max_prompt_tokens`, `max_output_tokens`):
// an integer no smaller than the mean it bounds. 0 when absent.
int max_tokens_at(const YamlField& d, const char* key, int mean) {
  const auto v = d.integer_at(key, 1, kMaxTokens, false);
  if (!v) return 0;
  if (*v < mean) {
    d[key].error("value " + std::to_string(*v) + " is below the mean it bounds (" +
                 std::string(key).substr(4) + ": " + std::to_string(mean) +
                 "): a maximum is at least the mean");
    return 0;
  }
  return static_cast<int>(*v);
}

void parse_demand(const YamlField& d, ModelSpec& m) {
  const ModelFamily fam = m.arch.family;
  if (!d.present()) {
    d.error("missing required field (" + std::string(rate_key(fam)) + ", concurrency or trace)");
    return;
  }
  if (!d.expect_map()) return;
  if (has_key(d, "trace")) {
    for (const char* other : {"fps", "rps", "concurrency", "prompt_tokens", "output_tokens",
                              "max_prompt_tokens", "max_output_tokens"}) {
      if (has_key(d, other)) {
        d[other].error("a trace demand takes its rate and lengths from the trace: give either "
                       "trace or " + std::string(other) + ", not both");
        return;
      }
    }
    parse_trace_demand(d, m);
    return;
  }
  if (fam == ModelFamily::kLlm) {
    d.check_keys({"rps", "concurrency", "prompt_tokens", "output_tokens", "max_prompt_tokens",
                  "max_output_tokens"});
  } else {
    d.check_keys({rate_key(fam), "concurrency"});
  }
  parse_demand_mode(d, fam, m.demand, true);
  if (fam == ModelFamily::kLlm) {
    // A closed loop of LLM requests still needs their lengths: they set each request's work.
    m.demand.prompt_tokens =
        static_cast<int>(d.integer_at("prompt_tokens", 1, kMaxTokens, true).value_or(0));
    m.demand.output_tokens =
        static_cast<int>(d.integer_at("output_tokens", 1, kMaxTokens, true).value_or(0));
    m.demand.max_prompt_tokens = max_tokens_at(d, "max_prompt_tokens", m.demand.prompt_tokens);
    m.demand.max_output_tokens = max_tokens_at(d, "max_output_tokens", m.demand.output_tokens);
  }
}

// `telemetry: {source, labels, queries}` (docs/stack.md).
void parse_telemetry_source(const YamlField& f, ModelSpec& m) {
  if (!f.expect_map()) return;
  f.check_keys({"source", "labels", "queries"});
  const auto source = f.string_at("source", true);
  if (!source) return;
  const auto kind = telemetry_source_kind(*source);
  if (!kind) {
    f["source"].error("unknown telemetry source '" + *source +
                      "' (known: vllm, triton, custom)" +
                      did_you_mean(*source, std::vector<std::string>{"vllm", "triton", "custom"}));
    return;
  }
  TelemetrySource& t = m.telemetry;
  t.kind = *kind;
  if (t.kind == TelemetrySource::Kind::kVllm && m.arch.family != ModelFamily::kLlm) {
    f["source"].error("vLLM serves LLMs and '" + m.arch.name +
                      "' is not one; use triton or custom");
  }
  if (t.kind == TelemetrySource::Kind::kTriton && m.arch.family == ModelFamily::kLlm) {
    f["source"].error("Triton's nv_inference_* metrics carry no time to first token or per "
                      "output token; for an LLM use vllm, or custom with your backend's metrics");
  }
  const YamlField labels = f["labels"];
  if (labels.present() && labels.expect_map()) {
    for (const std::string& k : labels.keys()) {
      const YamlField v = labels[k];
      if (!is_prometheus_label_name(k)) {
        v.error("'" + k + "' is not a Prometheus label name ([a-zA-Z_][a-zA-Z0-9_]*, not '__')");
        continue;
      }
      if (auto text = v.string()) t.labels.emplace_back(k, *text);
    }
  }
  if (!labels.present()) {
    if (t.kind == TelemetrySource::Kind::kVllm) t.labels = {{"model_name", m.name}};
    if (t.kind == TelemetrySource::Kind::kTriton) t.labels = {{"model", m.name}};
  }
  const YamlField queries = f["queries"];
  if (t.kind != TelemetrySource::Kind::kCustom) {
    if (queries.present()) {
      queries.error("queries are for source: custom; " + std::string(to_string(t.kind)) +
                    " builds its own from the stack's metric names");
    }
    return;
  }
  if (!queries.present()) {
    f.error("source: custom needs 'queries': PromQL per metric");
    return;
  }
  if (!queries.expect_map()) return;
  std::vector<std::string> known;
  for (const auto& s : kStackMetrics) known.emplace_back(s.name);
  for (const std::string& k : queries.keys()) {
    const YamlField v = queries[k];
    if (!is_stack_metric(k)) {
      v.error("unknown metric '" + k + "'" + did_you_mean(k, known) + " (known: " +
              join(known, ", ") + ")");
      continue;
    }
    auto text = v.string();
    if (!text) continue;
    if (text->empty()) {
      v.error("must be a PromQL expression");
      continue;
    }
    t.queries.emplace_back(k, *text);
  }
}

void parse_sla(const YamlField& s, ModelSpec& m) {
  if (!s.present()) return;
  if (!s.expect_map()) return;
  if (m.arch.family == ModelFamily::kLlm) {
    s.check_keys({"latency_ms_p95", "ttft_ms_p95", "tpot_ms_p95", "min_throughput"});
    m.sla.ttft_ms_p95 = s.number_at("ttft_ms_p95", 1e-3, kMaxSlaMs, false);
    m.sla.tpot_ms_p95 = s.number_at("tpot_ms_p95", 1e-3, kMaxSlaMs, false);
  } else {
    s.check_keys({"latency_ms_p95", "min_throughput"});
  }
  m.sla.latency_ms_p95 = s.number_at("latency_ms_p95", 1e-3, kMaxSlaMs, false);
  m.sla.min_throughput = s.number_at("min_throughput", 0, kMaxRate * 1e3, false);
}

// `streams: [cam0, cam1, ...]`: the camera streams of one vision model (names, unique).
void parse_streams(const YamlField& f, ModelSpec& m) {
  if (m.arch.family != ModelFamily::kVision) {
    f.error("streams are camera streams: only a vision model takes them (" + m.arch.name +
            " is not one)");
    return;
  }
  if (!f.expect_sequence()) return;
  if (f.size() == 0 || f.size() > kMaxStreams) {
    f.error("expected 1 to " + std::to_string(kMaxStreams) + " stream names");
    return;
  }
  for (std::size_t i = 0; i < f.size(); ++i) {
    const YamlField e = f.at(i);
    const auto name = e.string();
    if (!name) continue;
    if (!valid_name(*name)) {
      e.error("names use letters, digits, '_', '-', '.' (at most 64), got '" + *name + "'");
    } else if (std::find(m.streams.begin(), m.streams.end(), *name) != m.streams.end()) {
      e.error("stream '" + *name + "' is listed twice");
    } else {
      m.streams.push_back(*name);
    }
  }
}

}  // namespace

// Rate or closed loop, never both: `fps`/`rps` offers a rate, `concurrency` keeps N requests
// in flight. Returns false (after reporting) when both are given.
bool parse_demand_mode(const YamlField& d, ModelFamily fam, Demand& out, bool rate_required) {
  const std::string rate = rate_key(fam);
  const bool has_rate = d[rate].present();
  const bool has_concurrency = d["concurrency"].present();
  if (has_rate && has_concurrency) {
    d["concurrency"].error("give either " + rate + " (a rate) or concurrency (requests in " +
                           "flight), not both");
    return false;
  }
  if (has_concurrency) {
    const auto n = d.integer_at("concurrency", 1, kMaxConcurrency, true);
    if (n) {
      out.concurrency = static_cast<int>(*n);
      out.fps = 0;
      out.rps = 0;
    }
    return true;
  }
  const double min = fam == ModelFamily::kVision ? 1e-3 : 1e-4;
  const auto v = d.number_at(rate, min, kMaxRate, rate_required);
  if (v) {
    (fam == ModelFamily::kVision ? out.fps : out.rps) = *v;
    out.concurrency = 0;
  }
  return true;
}

std::optional<ModelSpec> parse_model(const YamlField& f, const Catalog& catalog,
                                     std::size_t gpus) {
  if (!f.expect_map()) return std::nullopt;
  f.check_keys({"name", "model", "knobs", "demand", "sla", "weight", "active", "gpu",
                "telemetry", "streams"});
  ModelSpec m;
  m.line = f.line();
  const auto name = f.string_at("name", true);
  if (name && !valid_name(*name)) {
    f["name"].error("names use letters, digits, '_', '-', '.' (at most 64), got '" + *name +
                    "'");
  }
  const auto model = f.string_at("model", true);
  if (!name || !model) return std::nullopt;
  m.name = *name;
  const ModelArch* arch = catalog.find_model(*model);
  if (arch == nullptr) {
    f["model"].error("unknown catalog model '" + *model + "'" +
                     did_you_mean(*model, catalog.model_names()));
    return std::nullopt;
  }
  m.arch = *arch;
  if (m.arch.family == ModelFamily::kVision && m.arch.reference_size > 0) {
    m.base.imgsz = m.arch.reference_size;
  }
  if (!m.arch.precisions.empty() &&
      std::find(m.arch.precisions.begin(), m.arch.precisions.end(), m.base.precision) ==
          m.arch.precisions.end()) {
    m.base.precision = m.arch.precisions.front();
  }
  parse_knobs(f["knobs"], m);
  parse_demand(f["demand"], m);
  parse_sla(f["sla"], m);
  if (f["weight"].present()) m.weight = f["weight"].number(1e-6, kMaxWeight).value_or(1);
  if (f["active"].present()) m.active = f["active"].boolean().value_or(true);
  if (f["telemetry"].present()) parse_telemetry_source(f["telemetry"], m);
  if (f["streams"].present()) parse_streams(f["streams"], m);
  if (f["gpu"].present()) {
    const YamlField g = f["gpu"];
    const auto k = g.integer(0, kMaxGpus - 1);
    if (k && *k >= static_cast<long long>(gpus)) {
      g.error("GPU " + std::to_string(*k) + " does not exist: the node has " +
              std::to_string(gpus) + " GPU(s), numbered from 0 (see 'gpus')");
    } else if (k) {
      m.gpu = static_cast<std::size_t>(*k);
    }
  }
  return m;
}

}  // namespace corun::workload_detail

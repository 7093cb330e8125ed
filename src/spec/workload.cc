#include "corun/spec/workload.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>

#include "corun/core/atomic_file.h"
#include "corun/core/rng.h"
#include "corun/core/strings.h"
#include "corun/core/yaml.h"

namespace corun {

namespace {

// Input limits: generous for real deployments, small enough that nothing downstream overflows.
constexpr std::size_t kMaxModels = 64;
constexpr std::size_t kMaxKnobValues = 64;
constexpr double kMaxLocalConfigs = 1e6;
constexpr double kMaxRate = 1e5;          // frames or requests per second
constexpr long long kMaxTokens = 1 << 20;  // prompt or output tokens per request
constexpr double kMaxSlaMs = 1e7;
constexpr double kMaxWeight = 1e6;
constexpr long long kMaxGpus = 64;           // GPUs of one node (DGX-class nodes hold 8)
constexpr std::size_t kMaxMigCandidates = 32;  // partitionings offered to the planner
constexpr std::size_t kMaxNodeLayouts = 256;   // partitionings of the whole node it enumerates

std::string fnv1a_hex(std::string_view text) {
  const std::uint64_t h = fnv1a(text);
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

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

constexpr double kMaxDurationS = 30 * 24 * 3600.0;
// A trace's rate may be thinned or multiplied: up to a thousand times its recorded load.
constexpr double kMaxTraceScale = 1e3;

// Whether a map has `key`, also when its value is null (`interference: null`).
bool has_key(const YamlField& f, const std::string& key) {
  const YAML::Node& n = f.node();
  return n.IsMap() && n[key].IsDefined();
}

// The rate key of a family's demand: frames for vision, requests for everything else.
const char* rate_key(ModelFamily fam) { return fam == ModelFamily::kVision ? "fps" : "rps"; }

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

// One partition: a list of the device's MIG profile names, checked against its slice counts.
std::optional<MigPartition> parse_partition(const YamlField& f, const MigGpu& mig) {
  if (!f.expect_sequence()) return std::nullopt;
  MigPartition out;
  for (std::size_t i = 0; i < f.size(); ++i) {
    const YamlField e = f.at(i);
    const auto name = e.string();
    if (!name) return std::nullopt;
    const MigProfile* p = mig.find(*name);
    if (p == nullptr) {
      e.error("unknown MIG profile '" + *name + "' for " + mig.device +
              did_you_mean(*name, mig.profile_names()) + " (profiles: " +
              join(mig.profile_names(), ", ") + ")");
      return std::nullopt;
    }
    out.push_back(*p);
  }
  if (const std::string why = mig.invalid_reason(out); !why.empty()) {
    f.error("not a valid MIG partition: " + why);
    return std::nullopt;
  }
  return out;
}

// The device's MIG table, or an error at `f` when the device has none.
const MigGpu* mig_of(const YamlField& f, const Workload& w, const MigCatalog& table) {
  const MigGpu* mig = table.find(w.device.name);
  if (mig == nullptr) {
    f.error("device '" + w.device.name + "' does not support MIG (catalog/mig.yaml lists the " +
            "devices that do)");
  }
  return mig;
}

// `gpus: N` or `gpus: [{mig: [...]}, {}]`, and the node's candidate partitionings
// `mig: [[...], ...]`, which every GPU the workload does not partition itself may take.
void parse_node(const YamlField& gpus, const YamlField& mig, const Catalog& catalog,
                Workload& w) {
  if (!gpus.present() && !mig.present()) return;
  auto table = MigCatalog::of(catalog);
  if (!table) {
    gpus.error(table.error().what());
    return;
  }
  std::vector<MigPartition> candidates;
  if (mig.present()) {
    const MigGpu* geometry = mig_of(mig, w, *table);
    if (geometry != nullptr && mig.expect_sequence()) {
      if (mig.size() > kMaxMigCandidates) {
        mig.error("too many partitionings (" + std::to_string(mig.size()) + ", at most " +
                  std::to_string(kMaxMigCandidates) + ")");
      } else {
        for (std::size_t i = 0; i < mig.size(); ++i) {
          if (auto p = parse_partition(mig.at(i), *geometry)) candidates.push_back(std::move(*p));
        }
      }
    }
  }
  const std::vector<MigPartition> free_gpu =
      candidates.empty() ? std::vector<MigPartition>{MigPartition{}} : candidates;
  std::vector<std::vector<MigPartition>> options;
  if (!gpus.present()) {
    options.push_back(free_gpu);
  } else if (gpus.is_scalar()) {
    const auto n = gpus.integer(1, kMaxGpus);
    if (n) options.assign(static_cast<std::size_t>(*n), free_gpu);
  } else if (gpus.is_sequence()) {
    if (!gpus.expect_sequence()) return;
    if (gpus.size() > static_cast<std::size_t>(kMaxGpus)) {
      gpus.error("too many GPUs (" + std::to_string(gpus.size()) + ", at most " +
                 std::to_string(kMaxGpus) + ")");
      return;
    }
    for (std::size_t g = 0; g < gpus.size(); ++g) {
      const YamlField e = gpus.at(g);
      if (!e.present()) {  // `- ` or `- null`: a GPU left to the node's choice
        options.push_back(free_gpu);
        continue;
      }
      if (!e.expect_map()) continue;
      e.check_keys({"mig"});
      if (!e["mig"].present()) {
        options.push_back(free_gpu);
        continue;
      }
      const MigGpu* geometry = mig_of(e["mig"], w, *table);
      if (geometry == nullptr) continue;
      if (auto p = parse_partition(e["mig"], *geometry)) options.push_back({std::move(*p)});
    }
  } else {
    gpus.error("expected a GPU count or a list of GPUs ({} or {mig: [profiles]})");
  }
  if (options.empty()) return;
  NodeSpec node{options};
  if (node.layout_count() > kMaxNodeLayouts) {
    (mig.present() ? mig : gpus)
        .error("too many ways to partition the node (" + std::to_string(node.layout_count()) +
               ", at most " + std::to_string(kMaxNodeLayouts) +
               "): fix some GPUs' partitions in 'gpus' or offer fewer candidates");
    return;
  }
  w.node = std::move(node);
}


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
  auto find_model = [&](const YamlField& name_field) -> std::optional<std::size_t> {
    const auto name = name_field.string();
    if (!name) return std::nullopt;
    const auto i = w.find_model(*name);
    if (!i) {
      std::vector<std::string> names;
      for (const auto& m : w.models) names.push_back(m.name);
      name_field.error("no model '" + *name + "' in the workload" + did_you_mean(*name, names));
    }
    return i;
  };
  if (kind == "arrive" || kind == "depart") {
    e.kind = kind == "arrive" ? TimelineEvent::Kind::kArrive : TimelineEvent::Kind::kDepart;
    const auto i = find_model(body);
    if (!i) return;
    e.model = *i;
  } else {
    if (!body.expect_map()) return;
    const YamlField model_field = body["model"];
    if (!model_field.present()) {
      model_field.error("missing required field");
      return;
    }
    const auto i = find_model(model_field);
    if (!i) return;
    e.model = *i;
    const ModelSpec& m = w.models[*i];
    const bool llm = m.arch.family == ModelFamily::kLlm;
    if (m.trace && (kind == "demand" || kind == "context")) {
      body.error("model '" + m.name + "' replays its demand from the trace '" + m.trace->file +
                 "': " + kind + " events do not apply to it");
      return;
    }
    if (kind == "demand") {
      e.kind = TimelineEvent::Kind::kDemand;
      e.demand = m.demand;
      const char* rate = rate_key(m.arch.family);
      body.check_keys({"model", rate, "concurrency"});
      if (!body[rate].present() && !body["concurrency"].present()) {
        body[rate].error("missing required field (or concurrency)");
      }
      parse_demand_mode(body, m.arch.family, e.demand, false);
    } else if (kind == "sla") {
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
    } else {  // context
      e.kind = TimelineEvent::Kind::kContext;
      if (!llm) {
        body.error("context events apply to LLMs; '" + m.name + "' is " +
                   std::string(to_string(m.arch.family)));
        return;
      }
      body.check_keys({"model", "prompt_tokens", "output_tokens"});
      e.demand = m.demand;
      if (auto v = body.integer_at("prompt_tokens", 1, kMaxTokens, false)) {
        e.demand.prompt_tokens = static_cast<int>(*v);
      }
      if (auto v = body.integer_at("output_tokens", 1, kMaxTokens, false)) {
        e.demand.output_tokens = static_cast<int>(*v);
      }
    }
  }
  w.timeline.events.push_back(e);
}

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

}  // namespace

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

namespace {

// `tools: {scenario: FILE, every_s: S}`. The scenario itself is read where it is used (corun
// plan, corun run), which know the tool catalog; here only its shape is checked.
void parse_tools(const YamlField& f, Workload& w) {
  if (!f.present() || !f.expect_map()) return;
  f.check_keys({"scenario", "every_s"});
  ToolBurstSpec t;
  t.line = f.line();
  const auto scenario = f.string_at("scenario", true);
  if (scenario && scenario->empty()) f["scenario"].error("must name a tool scenario file");
  const auto every = f.number_at("every_s", 1e-3, kMaxDurationS, true);
  if (!w.node.single_gpu()) {
    f.error("a declared tool burst is planned on one GPU; this workload has " +
            std::to_string(w.node.gpus()) + " GPU(s) or MIG slices");
    return;
  }
  if (!scenario || scenario->empty() || !every) return;
  t.scenario = *scenario;
  t.every_s = *every;
  w.tools = std::move(t);
}

// Trace demands against the timeline: the replay starts at least one control interval into the
// trace (the planner starts from the interval before), and the trace lasts the whole run. Sets
// each one's initial demand and folds its text into the workload's hash.
void resolve_traces(const YamlField& models, Workload& w) {
  const double interval = w.timeline.interval_s > 0 ? w.timeline.interval_s : 10;
  const double duration = w.timeline.duration_s > 0 ? w.timeline.duration_s : interval;
  std::string identity = w.hash;
  for (std::size_t i = 0; i < w.models.size(); ++i) {
    ModelSpec& m = w.models[i];
    if (!m.trace) continue;
    TraceDemand& t = *m.trace;
    const YamlField d = models.at(i)["demand"];
    if (t.start_s < 0) t.start_s = interval;
    if (t.start_s < interval) {
      d["start_s"].error("must be at least one control interval (" + format_number(interval) +
                         " s): the planner starts from the demand of the interval before it");
      continue;
    }
    if (t.start_s + duration > t.trace->span_s()) {
      d["trace"].error("'" + t.file + "' covers " + format_number(t.trace->span_s()) +
                       " s from its first request; the run needs start_s + duration_s = " +
                       format_number(t.start_s + duration) + " s");
      continue;
    }
    m.demand = t.initial(interval);
    identity += ":" + std::to_string(t.trace->text_hash());
  }
  if (identity != w.hash) w.hash = fnv1a_hex(identity);
}

}  // namespace

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

Result<Workload> parse_workload(std::string_view text, const std::string& file,
                                const Catalog& catalog) {
  auto root = parse_yaml(text, file);
  if (!root) return root.error();
  Diagnostics diags;
  const YamlField top(*root, file, "", &diags);
  if (!top.present() || !top.is_map()) {
    diags.add({file, top.line(), 0, "", "a workload must be a mapping with 'device' and 'models'"});
    return diags.to_error();
  }
  top.check_keys({"name", "description", "device", "gpus", "mig", "models", "objective", "timeline",
                  "profiling", "tools"});
  Workload w;
  w.file = file;
  w.hash = fnv1a_hex(text);

  const YamlField dev = top["device"];
  if (!dev.present()) {
    dev.error("missing required field (a catalog device such as 'rtx3090', or a mapping)");
  } else if (dev.is_scalar()) {
    const Device* d = catalog.find_device(dev.node().Scalar());
    if (d == nullptr) {
      dev.error("unknown catalog device '" + dev.node().Scalar() + "'" +
                did_you_mean(dev.node().Scalar(), catalog.device_names()));
    } else {
      w.device = *d;
    }
  } else if (dev.expect_map()) {
    const auto name = dev["name"].present() ? dev["name"].string() : std::string("custom");
    const auto d = Catalog::parse_device(dev, name.value_or("custom"));
    if (d) w.device = *d;
  }

  if (diags.empty()) parse_node(top["gpus"], top["mig"], catalog, w);

  const YamlField models = top["models"];
  if (!models.present()) {
    models.error("missing required field (a list of co-running models)");
  } else if (models.expect_sequence()) {
    if (models.size() > kMaxModels) {
      models.error("too many models (" + std::to_string(models.size()) + ", at most " +
                   std::to_string(kMaxModels) + ")");
    } else {
      std::set<std::string> names;
      for (std::size_t i = 0; i < models.size(); ++i) {
        auto m = parse_model(models.at(i), catalog, w.node.gpus());
        if (!m) continue;
        if (!names.insert(m->name).second) {
          models.at(i)["name"].error("duplicate model name '" + m->name + "'");
          continue;
        }
        w.models.push_back(std::move(*m));
      }
    }
  }

  const YamlField obj = top["objective"];
  if (obj.present() && obj.expect_map()) {
    obj.check_keys({"maximize"});
    const auto what = obj.string_at("maximize", true);
    static const std::vector<std::string> kObjectives = {"utility", "throughput"};
    if (what && std::find(kObjectives.begin(), kObjectives.end(), *what) == kObjectives.end()) {
      obj["maximize"].error("unknown objective '" + *what + "'" + did_you_mean(*what, kObjectives) +
                            " (known: utility, throughput)");
    } else if (what) {
      w.objective.maximize = *what;
    }
  }
  const YamlField profiling = top["profiling"];
  if (profiling.present()) {
    static const std::vector<std::string> kProfiling = {"meanfield", "none"};
    const auto how = profiling.string();
    if (how && *how == "none") {
      w.profiling = Profiling::kNone;
    } else if (how && *how != "meanfield") {
      profiling.error("unknown profiling '" + *how + "'" + did_you_mean(*how, kProfiling) +
                      " (known: meanfield, none)");
    }
  }
  if (diags.empty()) parse_timeline(top["timeline"], w);
  if (diags.empty()) resolve_traces(models, w);
  parse_tools(top["tools"], w);
  if (!diags.empty()) return diags.to_error();
  return w;
}

std::optional<ModelSpec> parse_model_entry(const YAML::Node& entry, const std::string& file,
                                           const Catalog& catalog, Diagnostics& diags) {
  const YamlField f(entry, file, "", &diags);
  const std::size_t before = diags.items().size();
  // A trace is replayed interval by interval along a workload's timeline (corun run); an entry
  // on its own has none.
  if (f.is_map() && f["demand"].is_map() && has_key(f["demand"], "trace")) {
    f["demand"]["trace"].error("a trace demand belongs to a workload file with a timeline; "
                               "give rps, prompt_tokens and output_tokens");
    return std::nullopt;
  }
  // A model entry on its own belongs to a one-GPU workload (what corun serve plans): a `gpu`
  // pin other than 0 is refused as it would be in such a workload.
  auto m = parse_model(f, catalog, 1);
  // parse_model() reports while it reads and returns the model it could build: any report
  // makes the entry invalid, as it does the workload it would be part of.
  if (diags.items().size() != before) return std::nullopt;
  return m;
}

Result<Workload> load_workload(const std::filesystem::path& path, const Catalog& catalog) {
  auto text = read_file(path);
  if (!text) return text.error();
  return parse_workload(*text, path.string(), catalog);
}

}  // namespace corun

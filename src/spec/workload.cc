// Parsing of a workload file: its sections in order (device, node, models, objective,
// profiling, timeline, tools), trace demands against the timeline, and a model entry on its own.
#include "corun/spec/workload.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>

#include "corun/core/atomic_file.h"
#include "corun/core/rng.h"
#include "corun/core/strings.h"
#include "corun/core/yaml.h"
#include "workload_internal.h"

namespace corun {

using workload_detail::has_key;
using workload_detail::kMaxDurationS;
using workload_detail::kMaxModels;
using workload_detail::parse_model;
using workload_detail::parse_node;
using workload_detail::parse_timeline;

namespace {

std::string fnv1a_hex(std::string_view text) {
  const std::uint64_t h = fnv1a(text);
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

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

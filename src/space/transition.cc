#include "corun/space/transition.h"

#include <algorithm>
#include <numeric>

#include <nlohmann/json.hpp>

#include "corun/catalog/embedded.h"
#include "corun/core/check.h"
#include "corun/core/enum_names.h"
#include "corun/core/yaml.h"

namespace corun {

namespace {

constexpr EnumNames<Actuation, 4> kActuationNames{{{{Actuation::kNone, "none"},
                                                    {Actuation::kLive, "live"},
                                                    {Actuation::kReload, "reload"},
                                                    {Actuation::kRestart, "restart"}}}};
constexpr EnumNames<Stack, 3> kStackNames{
    {{{Stack::kVllm, "vllm"}, {Stack::kTriton, "triton"}, {Stack::kStream, "stream"}}}};
constexpr std::array<ModelFamily, 4> kFamilies = {ModelFamily::kVision, ModelFamily::kEncoder,
                                                  ModelFamily::kSpeech, ModelFamily::kLlm};
// The order in which an unknown family's message lists the families.
constexpr std::array<ModelFamily, 4> kFamiliesListed = {
    ModelFamily::kLlm, ModelFamily::kVision, ModelFamily::kEncoder, ModelFamily::kSpeech};
constexpr std::string_view kActuationFile = "actuation.yaml";

std::string joined(std::span<const std::string_view> names) {
  std::string out;
  for (auto n : names) out += (out.empty() ? "" : ", ") + std::string(n);
  return out;
}

// The stacks' names, in table order.
std::string stack_list() {
  std::vector<std::string_view> names;
  for (const auto& e : kStackNames.table) names.push_back(e.name);
  return joined(names);
}

// The classes a knob may be given: every actuation but kNone.
std::string knob_class_list() {
  std::vector<std::string_view> names;
  for (const auto& e : kActuationNames.table) {
    if (e.value != Actuation::kNone) names.push_back(e.name);
  }
  return joined(names);
}

std::string family_list() {
  std::vector<std::string_view> names;
  for (ModelFamily f : kFamiliesListed) names.push_back(to_string(f));
  return joined(names);
}

bool serves(const StackActuation& s, ModelFamily f) {
  return std::find(s.serves.begin(), s.serves.end(), f) != s.serves.end();
}

bool knob_applies(KnobId k, ModelFamily f) {
  const auto& fam = knob_decl(k).families;
  return std::find(fam.begin(), fam.end(), f) != fam.end();
}

void parse_stack(const YamlField& f, StackActuation& s) {
  if (!f.expect_map()) return;
  f.check_keys({"serves", "knobs", "process_start_s", "compile_s", "graph_capture_s",
                "engine_load_s", "warmup_requests", "warmup_slowdown", "start_gpu_s",
                "start_gpu_share"});
  const YamlField serves_field = f["serves"];
  if (!serves_field.present()) {
    f.error("missing required field 'serves'");
  } else if (serves_field.expect_sequence()) {
    for (std::size_t i = 0; i < serves_field.size(); ++i) {
      const auto name = serves_field.at(i).string();
      if (!name) continue;
      if (auto fam = parse_family(*name)) {
        s.serves.push_back(*fam);
      } else {
        serves_field.at(i).error("unknown family '" + *name + "' (" + family_list() + ")");
      }
    }
  }
  const YamlField knobs = f["knobs"];
  if (!knobs.present()) {
    f.error("missing required field 'knobs'");
  } else if (knobs.expect_map()) {
    for (const auto& key : knobs.keys()) {
      const YamlField k = knobs[key];
      const auto id = find_knob(key);
      if (!id) {
        k.error("unknown knob '" + key + "'");
        continue;
      }
      const auto cls = k.string();
      if (!cls) continue;
      const auto a = kActuationNames.parse(*cls);
      if (!a || *a == Actuation::kNone) {
        k.error("unknown class '" + *cls + "' (" + knob_class_list() + ")");
        continue;
      }
      s.knob[static_cast<std::size_t>(*id)] = *a;
    }
    // Every knob meaningful to a family the stack serves has a class there.
    for (const auto& d : knob_decls()) {
      if (s.knob[static_cast<std::size_t>(d.id)]) continue;
      for (ModelFamily fam : s.serves) {
        if (knob_applies(d.id, fam)) {
          knobs.error("no class for knob '" + d.name + "' (family " +
                      std::string(to_string(fam)) + " uses it)");
          break;
        }
      }
    }
  }
  auto number = [&](std::string_view key, double max, double& out) {
    if (auto v = f.number_at(key, 0, max, true)) out = *v;
  };
  number("process_start_s", 3600, s.process_start_s);
  number("compile_s", 3600, s.compile_s);
  number("graph_capture_s", 3600, s.graph_capture_s);
  number("engine_load_s", 3600, s.engine_load_s);
  if (auto v = f.integer_at("warmup_requests", 0, 100000, true)) {
    s.warmup_requests = static_cast<int>(*v);
  }
  if (auto v = f.number_at("warmup_slowdown", 1, 100, true)) s.warmup_slowdown = *v;
  number("start_gpu_s", 3600, s.start_gpu_s);
  if (auto v = f.number_at("start_gpu_share", 0, 1, true)) s.start_gpu_share = *v;
}

}  // namespace

std::string_view to_string(Actuation a) { return kActuationNames.name(a); }
std::string_view to_string(Stack s) { return kStackNames.name(s); }

Result<ActuationTable> ActuationTable::parse(std::string_view text, const std::string& file) {
  auto root = parse_yaml(text, file);
  if (!root) return root.error();
  Diagnostics diags;
  const YamlField f(*root, file, "", &diags);
  ActuationTable t;
  if (f.expect_map()) {
    f.check_keys({"stacks", "defaults"});
    const YamlField stacks = f["stacks"];
    std::array<bool, 3> seen{};
    if (!stacks.present()) {
      f.error("missing required field 'stacks'");
    } else if (stacks.expect_map()) {
      for (const auto& key : stacks.keys()) {
        const auto s = kStackNames.parse(key);
        if (!s) {
          stacks[key].error("unknown stack '" + key + "' (" + stack_list() + ")");
          continue;
        }
        const auto i = static_cast<std::size_t>(*s);
        seen[i] = true;
        t.stacks_[i].stack = *s;
        parse_stack(stacks[key], t.stacks_[i]);
      }
      for (std::size_t i = 0; i < seen.size(); ++i) {
        if (!seen[i]) {
          stacks.error("missing stack '" + std::string(kStackNames.table[i].name) + "'");
        }
      }
    }
    const YamlField defaults = f["defaults"];
    if (!defaults.present()) {
      f.error("missing required field 'defaults'");
    } else if (defaults.expect_map()) {
      std::array<bool, 4> given{};
      for (const auto& key : defaults.keys()) {
        const YamlField d = defaults[key];
        const auto fam = parse_family(key);
        if (!fam) {
          d.error("unknown family '" + key + "'");
          continue;
        }
        const auto name = d.string();
        if (!name) continue;
        const auto s = kStackNames.parse(*name);
        if (!s) {
          d.error("unknown stack '" + *name + "' (" + stack_list() + ")");
          continue;
        }
        if (diags.empty() && !serves(t.stacks_[static_cast<std::size_t>(*s)], *fam)) {
          d.error("stack '" + *name + "' does not serve family '" + key + "'");
          continue;
        }
        t.defaults_[static_cast<std::size_t>(*fam)] = *s;
        given[static_cast<std::size_t>(*fam)] = true;
      }
      for (ModelFamily fam : kFamilies) {
        if (!given[static_cast<std::size_t>(fam)]) {
          defaults.error("no stack for family '" + std::string(to_string(fam)) + "'");
        }
      }
    }
  }
  if (!diags.empty()) return diags.to_error();
  return t;
}

Result<ActuationTable> ActuationTable::from_catalog(const Catalog& catalog) {
  if (auto text = catalog.file(kActuationFile)) return parse(*text, std::string(kActuationFile));
  for (const auto& f : embedded_catalog_files()) {
    if (f.name == kActuationFile) return parse(f.content, "<embedded>/actuation.yaml");
  }
  return Error("no actuation.yaml in the catalog", Error::Kind::kNotFound);
}

const ActuationTable& ActuationTable::builtin() {
  static const ActuationTable table = [] {
    auto t = from_catalog(Catalog::default_catalog());
    CORUN_CHECK_MSG(t.ok(), "the catalog's actuation.yaml must parse (tested)");
    return std::move(*t);
  }();
  return table;
}

Actuation ActuationTable::knob_class(ModelFamily f, KnobId knob) const {
  const auto& c = stack(stack_for(f)).knob[static_cast<std::size_t>(knob)];
  return c.value_or(Actuation::kLive);
}

ModelTransition model_transition(const ActuationTable& table, const Device& device,
                                 const ModelSpec& m, const Settings& from, const Settings& to) {
  ModelTransition t;
  t.stack = table.stack_for(m.arch.family);
  t.vram_old_bytes = model_vram_bytes(m, from, device.vram_bytes());
  t.vram_new_bytes = model_vram_bytes(m, to, device.vram_bytes());
  for (const auto& d : knob_decls()) {
    if (from.get(d.id) == to.get(d.id)) continue;
    t.changed.push_back(d.id);
    t.action = std::max(t.action, table.knob_class(m.arch.family, d.id));
  }
  const StackActuation& s = table.stack(t.stack);
  // Weights stream from storage through host memory over PCIe: the slower link bounds it.
  const double gbps = std::max(1e-3, std::min(device.storage_gbps, device.pcie_gbps));
  if (t.action >= Actuation::kReload) {
    t.load_s = weight_bytes(m.arch, to.precision) / (gbps * 1e9);
    t.warmup_requests = s.warmup_requests;
    t.warmup_slowdown = s.warmup_slowdown;
    t.start_gpu_s = s.start_gpu_s;
    t.start_gpu_share = s.start_gpu_share;
  }
  if (t.action == Actuation::kRestart) {
    t.downtime_s = s.process_start_s + s.compile_s + s.graph_capture_s + t.load_s;
  } else if (t.action == Actuation::kReload) {
    t.downtime_s = s.engine_load_s + t.load_s;
  }
  return t;
}

std::size_t JointTransition::count(Actuation a) const {
  return static_cast<std::size_t>(std::count_if(
      steps.begin(), steps.end(), [&](const TransitionStep& s) { return s.change.action == a; }));
}

double JointTransition::outage_s() const {
  double sum = 0;
  for (const auto& s : steps) sum += s.change.outage_s();
  return sum;
}

JointTransition joint_transition(const ActuationTable& table, const Workload& w,
                                 const JointConfig& from, const JointConfig& to) {
  JointTransition out;
  out.vram_bytes = w.device.vram_bytes();
  const std::size_t n = w.models.size();
  auto at = [](const JointConfig& c, std::size_t m) {
    return m < c.size() ? c[m] : kAbsent;
  };
  // VRAM held now (the old plan), and each step's change.
  double held = 0;
  for (std::size_t m = 0; m < n; ++m) {
    const std::int32_t l = at(from, m);
    if (l != kAbsent) {
      held += model_vram_bytes(w.models[m], w.models[m].settings(l), w.device.vram_bytes());
    }
  }
  std::vector<TransitionStep> steps;
  for (std::size_t m = 0; m < n; ++m) {
    const std::int32_t a = at(from, m);
    const std::int32_t b = at(to, m);
    if (a == b) continue;
    const ModelSpec& spec = w.models[m];
    TransitionStep s;
    s.model = m;
    s.name = spec.name;
    s.from = a;
    s.to = b;
    if (a != kAbsent) s.from_config = spec.describe(static_cast<std::size_t>(a));
    if (b != kAbsent) s.to_config = spec.describe(static_cast<std::size_t>(b));
    if (a != kAbsent && b != kAbsent) {
      s.change = model_transition(table, w.device, spec, spec.settings(static_cast<std::size_t>(a)),
                                  spec.settings(static_cast<std::size_t>(b)));
    } else {
      // A model that starts is a restart of nothing (its arrival is not a plan's choice); one
      // that stops only frees its memory.
      const Settings s0 = spec.settings(static_cast<std::size_t>(a != kAbsent ? a : b));
      s.change.stack = table.stack_for(spec.arch.family);
      s.change.action = b != kAbsent ? Actuation::kRestart : Actuation::kNone;
      s.change.vram_old_bytes = a != kAbsent ? model_vram_bytes(spec, s0, w.device.vram_bytes()) : 0;
      s.change.vram_new_bytes = b != kAbsent ? model_vram_bytes(spec, s0, w.device.vram_bytes()) : 0;
    }
    steps.push_back(std::move(s));
  }
  // Stops first (they free memory), then the steps that shrink, then those that grow: each
  // swap sees the most free memory it can. Within a group, the largest first.
  auto growth = [](const TransitionStep& s) {
    return s.change.vram_new_bytes - s.change.vram_old_bytes;
  };
  std::stable_sort(steps.begin(), steps.end(), [&](const TransitionStep& x, const TransitionStep& y) {
    const bool xs = x.to == kAbsent, ys = y.to == kAbsent;
    if (xs != ys) return xs;
    return growth(x) < growth(y);
  });
  double peak = held;
  int order = 0;
  for (auto& s : steps) {
    s.order = ++order;
    ModelTransition& c = s.change;
    if (s.to == kAbsent) {
      held -= c.vram_old_bytes;
      continue;
    }
    const bool swap = s.from != kAbsent && c.action >= Actuation::kReload;
    if (swap && held + c.vram_new_bytes <= out.vram_bytes) {
      c.make_before_break = true;
      peak = std::max(peak, held + c.vram_new_bytes);
    } else {
      peak = std::max(peak, held - c.vram_old_bytes + c.vram_new_bytes);
    }
    held += c.vram_new_bytes - c.vram_old_bytes;
  }
  out.vram_peak_bytes = std::max(peak, held);
  out.steps = std::move(steps);
  return out;
}

nlohmann::json to_json(const JointTransition& t) {
  nlohmann::json steps = nlohmann::json::array();
  for (const auto& s : t.steps) {
    nlohmann::json knobs = nlohmann::json::array();
    for (KnobId k : s.change.changed) knobs.push_back(knob_decl(k).name);
    steps.push_back({{"model", s.name},
                     {"order", s.order},
                     {"action", to_string(s.change.action)},
                     {"stack", to_string(s.change.stack)},
                     {"from", s.from_config},
                     {"to", s.to_config},
                     {"knobs", knobs},
                     {"downtime_s", s.change.downtime_s},
                     {"outage_s", s.change.outage_s()},
                     {"make_before_break", s.change.make_before_break},
                     {"swap_gpu_s", s.change.swap_gpu_seconds()},
                     {"vram_old_gb", s.change.vram_old_bytes / 1e9},
                     {"vram_new_gb", s.change.vram_new_bytes / 1e9},
                     {"warmup_requests", s.change.warmup_requests},
                     {"warmup_slowdown", s.change.warmup_slowdown}});
  }
  return {{"steps", steps},
          {"restarts", t.count(Actuation::kRestart)},
          {"reloads", t.count(Actuation::kReload)},
          {"outage_s", t.outage_s()},
          {"vram_peak_gb", t.vram_peak_bytes / 1e9},
          {"vram_gb", t.vram_bytes / 1e9}};
}

}  // namespace corun

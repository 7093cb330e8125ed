// A node's layouts: its GPUs and MIG slices under each choice of partitioning.
#include "corun/spec/node.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>
#include <set>

#include "corun/core/check.h"
#include "corun/core/yaml.h"

namespace corun {

std::string GpuUnit::label() const {
  std::string out = "gpu" + std::to_string(gpu);
  if (!profile.empty()) out += "/" + profile + "#" + std::to_string(slice);
  return out;
}

std::string NodeLayout::describe() const {
  std::string out;
  for (std::size_t i = 0; i < units.size(); ++i) {
    const GpuUnit& u = units[i];
    const bool first_of_gpu = i == 0 || units[i - 1].gpu != u.gpu;
    const bool last_of_gpu = i + 1 == units.size() || units[i + 1].gpu != u.gpu;
    if (first_of_gpu) {
      if (!out.empty()) out += ", ";
      out += "gpu" + std::to_string(u.gpu) + (u.profile.empty() ? " whole" : " [");
    }
    if (!u.profile.empty()) out += (first_of_gpu ? "" : " ") + u.profile;
    if (!u.profile.empty() && last_of_gpu) out += "]";
  }
  return out;
}

NodeLayout node_layout(const Workload& w, std::span<const std::size_t> choice) {
  const auto& options = w.node.options;
  CORUN_CHECK(choice.size() == options.size());
  NodeLayout out;
  out.choice.assign(choice.begin(), choice.end());
  for (std::size_t g = 0; g < options.size(); ++g) {
    CORUN_CHECK(choice[g] < options[g].size());
    const MigPartition& partition = options[g][choice[g]];
    if (partition.empty()) {
      out.units.push_back(GpuUnit{g, "", 0, w.device});
      continue;
    }
    for (std::size_t s = 0; s < partition.size(); ++s) {
      out.units.push_back(
          GpuUnit{g, partition[s].name, s, mig_slice_device(w.device, partition[s])});
    }
  }
  return out;
}

std::vector<NodeLayout> node_layouts(const Workload& w) {
  const auto& options = w.node.options;
  std::vector<std::size_t> choice(options.size(), 0);
  std::vector<NodeLayout> out;
  const std::size_t total = w.node.layout_count();
  for (std::size_t i = 0; i < total; ++i) {
    out.push_back(node_layout(w, choice));
    for (std::size_t g = options.size(); g-- > 0;) {  // mixed-radix increment, last GPU fastest
      if (++choice[g] < options[g].size()) break;
      choice[g] = 0;
    }
  }
  return out;
}

Workload unit_workload(const Workload& w, const GpuUnit& unit) {
  Workload out = w;
  out.device = unit.device;
  out.node = NodeSpec{};
  return out;
}

namespace {

YAML::Node device_node(const Device& d) {
  YAML::Node n;
  n["name"] = d.name;
  n["display_name"] = d.display_name;
  n["sm_count"] = d.sm_count;
  n["boost_clock_mhz"] = d.boost_clock_mhz;
  n["base_clock_mhz"] = d.base_clock_mhz;
  n["peak_fp32_tflops"] = d.peak_fp32_tflops;
  n["peak_fp16_tflops"] = d.peak_fp16_tflops;
  n["peak_bf16_tflops"] = d.peak_bf16_tflops;
  n["peak_int8_tops"] = d.peak_int8_tops;
  n["mem_bandwidth_gbps"] = d.mem_bandwidth_gbps;
  n["l2_mb"] = d.l2_mb;
  n["vram_gb"] = d.vram_gb;
  n["tdp_w"] = d.tdp_w;
  n["idle_power_w"] = d.idle_power_w;
  n["pcie_gbps"] = d.pcie_gbps;
  n["storage_gbps"] = d.storage_gbps;
  n["unified_memory"] = d.unified_memory;
  YAML::Node cpu;
  cpu["name"] = d.cpu.name;
  cpu["cores"] = d.cpu.cores;
  cpu["clock_ghz"] = d.cpu.clock_ghz;
  cpu["fp32_gflops_per_core"] = d.cpu.fp32_gflops_per_core;
  cpu["mem_bandwidth_gbps"] = d.cpu.mem_bandwidth_gbps;
  cpu["tdp_w"] = d.cpu.tdp_w;
  if (!d.cpu.source.empty()) cpu["source"] = d.cpu.source;
  n["cpu"] = cpu;
  if (!d.source.empty()) n["source"] = d.source;
  return n;
}

// The model a timeline event concerns (`arrive: cam3`, `demand: {model: cam0, ...}`), or ""
// for an event of the GPU (drift: interference, power cap, perturbation).
std::string event_model(const YAML::Node& e) {
  if (!e.IsMap()) return "";
  for (const char* key : {"arrive", "depart"}) {
    if (e[key] && e[key].IsScalar()) return e[key].Scalar();
  }
  for (const char* key : {"demand", "sla", "context"}) {
    if (e[key] && e[key].IsMap() && e[key]["model"] && e[key]["model"].IsScalar()) {
      return e[key]["model"].Scalar();
    }
  }
  return "";
}

}  // namespace

Result<std::string> unit_workload_text(std::string_view text, const Workload& w,
                                       const GpuUnit& unit, std::span<const std::size_t> models) {
  auto root = parse_yaml(text, w.file);
  if (!root) return root.error();
  if (!root->IsMap()) return Error(w.file + ": a workload must be a mapping");
  std::set<std::string> names;
  for (std::size_t m : models) {
    CORUN_CHECK(m < w.models.size());
    names.insert(w.models[m].name);
  }
  YAML::Node out;
  // Keys in the order a workload file is written; the node's keys (gpus, mig) are dropped.
  for (const char* key : {"name", "description"}) {
    if ((*root)[key]) out[key] = (*root)[key];
  }
  if (out["name"] && out["name"].IsScalar()) {
    out["name"] = out["name"].Scalar() + "-" + unit.label();
  }
  if (unit.profile.empty()) {
    out["device"] = (*root)["device"];
  } else {
    out["device"] = device_node(unit.device);
  }
  YAML::Node kept(YAML::NodeType::Sequence);
  for (const auto& entry : (*root)["models"]) {
    if (!entry.IsMap() || !entry["name"] || !names.contains(entry["name"].as<std::string>())) {
      continue;
    }
    YAML::Node copy = YAML::Clone(entry);
    copy.remove("gpu");
    // The unit's file is written elsewhere: a trace it replays is named by its resolved path.
    const auto m = w.find_model(entry["name"].as<std::string>());
    if (m && w.models[*m].trace && copy["demand"].IsMap()) {
      std::error_code ec;
      const auto path = std::filesystem::absolute(w.models[*m].trace->path, ec);
      copy["demand"]["trace"] = (ec ? w.models[*m].trace->path : path).string();
    }
    kept.push_back(copy);
  }
  out["models"] = kept;
  for (const char* key : {"objective", "profiling", "tools"}) {
    if ((*root)[key]) out[key] = (*root)[key];
  }
  if (const YAML::Node timeline = (*root)["timeline"]) {
    YAML::Node t = YAML::Clone(timeline);
    if (timeline.IsMap() && timeline["events"] && timeline["events"].IsSequence()) {
      YAML::Node events(YAML::NodeType::Sequence);
      for (const auto& e : timeline["events"]) {
        const std::string model = event_model(e);
        if (model.empty() || names.contains(model)) events.push_back(e);
      }
      t["events"] = events;
    }
    out["timeline"] = t;
  }
  YAML::Emitter emit;
  emit.SetDoublePrecision(17);
  emit << out;
  if (!emit.good()) return Error(w.file + ": cannot write the workload of " + unit.label());
  return "# " + unit.label() + " of the node workload " + w.file + " (" +
         std::to_string(models.size()) + " of its " + std::to_string(w.models.size()) +
         " models), written by corun run\n" + std::string(emit.c_str()) + "\n";
}

bool pin_allows(const Workload& w, std::size_t m, const GpuUnit& unit) {
  const auto& pin = w.models[m].gpu;
  return !pin || *pin == unit.gpu;
}

}  // namespace corun

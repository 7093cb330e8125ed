// corun space FILE: sizes of the local and joint configuration spaces, and VRAM feasibility.
#include <cstdio>
#include <limits>

#include "command.h"
#include "common.h"
#include "corun/space/node_space.h"

namespace corun::cli::cmd_space {
namespace {

// An LLM configuration whose KV cache for request_concurrency sequences does not fit the
// device runs KV-limited (space.h): it holds `sequences` at their mean occupancy.
struct KvLimited {
  std::string model, config;
  int concurrency = 0;
  double sequences = 0;
};

std::vector<KvLimited> kv_limited(const Workload& w) {
  std::vector<KvLimited> out;
  const double device = w.device.vram_bytes();
  for (const ModelSpec& m : w.models) {
    if (m.arch.family != ModelFamily::kLlm) continue;
    for (std::size_t l = 0; l < m.local_config_count(); ++l) {
      const Settings s = m.settings(l);
      const double full = model_vram_bytes(m, s, std::numeric_limits<double>::infinity());
      if (model_vram_bytes(m, s, device) >= full) continue;
      out.push_back(
          {m.name, m.describe(l), s.request_concurrency, llm_kv_sequences(m, s, device)});
    }
  }
  return out;
}

const bool registered = register_command({
    "space",
    "Count local and joint configurations of a workload and how many fit in VRAM",
    [](CLI::App& sub) {
      auto file = std::make_shared<std::string>();
      auto catalog = std::make_shared<std::string>();
      auto json = std::make_shared<bool>(false);
      sub.add_option("file", *file, "workload YAML")->required();
      sub.add_option("--catalog", *catalog, kCatalogFlagHelp);
      sub.add_flag("--json", *json, "print JSON");
      return std::function<int()>([file, catalog, json] {
        auto w = load_workload_file(*file, *catalog);
        if (!w) return report_error(w.error());
        const ConfigSpace space(*w);
        const auto feasible = space.feasible_count();
        // A node: the partitionings, their units, and the model-to-unit assignments (pins
        // respected) that multiply the knob space.
        nlohmann::json node = nullptr;
        std::string node_text;
        if (!w->node.single_gpu()) {
          node = {{"gpus", w->node.gpus()}, {"layouts", nlohmann::json::array()}};
          node_text = "node: " + std::to_string(w->node.gpus()) + " x " + w->device.name + ", " +
                      std::to_string(w->node.layout_count()) + " partitioning(s)\n";
          for (const auto& layout : node_layouts(*w)) {
            const ConfigCount placements = placement_count(*w, layout);
            nlohmann::json units = nlohmann::json::array();
            for (const auto& u : layout.units) units.push_back(u.label());
            node["layouts"].push_back({{"layout", layout.describe()},
                                       {"units", units},
                                       {"assignments", count_json(placements)},
                                       {"assignments_exact", placements.exact()}});
            node_text += "  " + layout.describe() + ": " + std::to_string(layout.units.size()) +
                         " unit(s), " + count_text(placements) + " assignments of models\n";
          }
        }
        const std::vector<KvLimited> limited = kv_limited(*w);
        if (*json) {
          nlohmann::json j;
          j["models"] = w->models.size();
          j["local_configs"] = space.local_counts();
          j["joint_configs"] = count_json(space.joint_count());
          j["joint_configs_exact"] = space.joint_count().exact();
          j["feasible_joint_configs"] = count_json(feasible);
          j["feasible_joint_configs_exact"] = feasible.exact();
          if (!node.is_null()) j["node"] = node;
          j["kv_limited"] = nlohmann::json::array();
          for (const auto& k : limited) {
            j["kv_limited"].push_back({{"model", k.model},
                                       {"config", k.config},
                                       {"request_concurrency", k.concurrency},
                                       {"sequences", k.sequences}});
          }
          std::printf("%s\n", j.dump().c_str());
          return kExitOk;
        }
        Table t({"model", "catalog", "local configs", "knobs"});
        for (std::size_t i = 0; i < w->models.size(); ++i) {
          const auto& m = w->models[i];
          std::string knobs;
          for (const auto& k : m.knobs) {
            knobs += (knobs.empty() ? "" : " ") + knob_decl(k.id).name + "[" +
                     std::to_string(k.values.size()) + "]";
          }
          t.add({m.name, m.arch.name, std::to_string(space.local_counts()[i]), knobs});
        }
        std::printf("%s", t.render().c_str());
        std::printf("joint configurations: %s (feasible in %.1f GB VRAM: %s)\n",
                    count_text(space.joint_count()).c_str(), w->device.vram_gb,
                    count_text(feasible).c_str());
        std::printf("%s", node_text.c_str());
        constexpr std::size_t kShown = 8;
        for (std::size_t i = 0; i < limited.size() && i < kShown; ++i) {
          const KvLimited& k = limited[i];
          const std::string config =
              k.config.empty() ? "request_concurrency=" + std::to_string(k.concurrency) : k.config;
          std::printf(
              "KV-limited: %s (%s): its KV cache holds about %.1f of %d sequences at once (the "
              "engine takes 0.9 of the device; the rest wait or are preempted)\n",
              k.model.c_str(), config.c_str(), k.sequences, k.concurrency);
        }
        if (limited.size() > kShown) {
          std::printf("KV-limited: %zu more configuration(s); --json lists them all\n",
                      limited.size() - kShown);
        }
        return kExitOk;
      });
    },
});

}  // namespace
}  // namespace corun::cli::cmd_space

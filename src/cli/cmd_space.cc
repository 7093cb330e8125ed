// corun space FILE: sizes of the local and joint configuration spaces, and VRAM feasibility.
#include <cstdio>

#include "command.h"
#include "common.h"
#include "corun/space/node_space.h"

namespace corun::cli {
namespace {

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
        if (*json) {
          nlohmann::json j;
          j["models"] = w->models.size();
          j["local_configs"] = space.local_counts();
          j["joint_configs"] = count_json(space.joint_count());
          j["joint_configs_exact"] = space.joint_count().exact();
          j["feasible_joint_configs"] = count_json(feasible);
          j["feasible_joint_configs_exact"] = feasible.exact();
          if (!node.is_null()) j["node"] = node;
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
        return kExitOk;
      });
    },
});

}  // namespace
}  // namespace corun::cli

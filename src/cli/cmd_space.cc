// corun space FILE: sizes of the local and joint configuration spaces, and VRAM feasibility.
#include <cstdio>

#include "command.h"
#include "common.h"

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
      sub.add_option("--catalog", *catalog, "catalog directory (default: built in)");
      sub.add_flag("--json", *json, "print JSON");
      return std::function<int()>([file, catalog, json] {
        auto w = load_workload_file(*file, *catalog);
        if (!w) return report_error(w.error());
        const ConfigSpace space(*w);
        const auto feasible = space.feasible_count();
        if (*json) {
          nlohmann::json j;
          j["models"] = w->models.size();
          j["local_configs"] = space.local_counts();
          j["joint_configs"] = count_json(space.joint_count());
          j["joint_configs_exact"] = space.joint_count().exact();
          j["feasible_joint_configs"] = count_json(feasible);
          j["feasible_joint_configs_exact"] = feasible.exact();
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
        return kExitOk;
      });
    },
});

}  // namespace
}  // namespace corun::cli

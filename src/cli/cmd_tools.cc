// corun tools profile: each catalog tool alone on CPU and GPU, classified by preference.
#include <cstdio>
#include <map>

#include "command.h"
#include "common.h"
#include "corun/core/strings.h"
#include "corun/core/version.h"
#include "corun/mapping/profile.h"

namespace corun::cli::cmd_tools {
namespace {

const bool registered = register_command({
    "tools profile",
    "Profile every catalog tool alone (end to end, PCIe included) on CPU and GPU and classify "
    "it GPU-preferred, CPU-preferred, device-neutral or ambiguous",
    [](CLI::App& sub) {
      auto device = std::make_shared<std::string>();
      auto catalog_dir = std::make_shared<std::string>();
      auto json = std::make_shared<bool>(false);
      auto clear = std::make_shared<double>(2.0);
      auto neutral = std::make_shared<double>(1.25);
      sub.add_option("--device", *device, "catalog device (default: the catalog's default)");
      sub.add_option("--catalog", *catalog_dir, kCatalogFlagHelp);
      sub.add_option("--clear", *clear, "speedup at which one side is preferred")
          ->check(CLI::Range(1.0, 1e6));
      sub.add_option("--neutral", *neutral, "speedup band within which a tool is neutral")
          ->check(CLI::Range(1.0, 1e6));
      sub.add_flag("--json", *json, "print JSON");
      return std::function<int()>([=] {
        auto cat = load_catalog(*catalog_dir);
        if (!cat) return report_error(cat.error());
        auto tools = mapping::tool_catalog(**cat);
        if (!tools) return report_error(tools.error());
        std::string name = *device;
        if (name.empty()) {
          const auto names = (*cat)->device_names();
          name = (*cat)->find_device("rtx3090") || names.empty() ? "rtx3090" : names.front();
        }
        const Device* d = (*cat)->find_device(name);
        if (!d) {
          return report_error(Error("--device: unknown device '" + name + "'" +
                                    did_you_mean(name, (*cat)->device_names())));
        }
        if (*neutral >= *clear) {
          return report_error(Error("--neutral must be below --clear"));
        }
        const mapping::ProfileThresholds th{*clear, *neutral};
        const auto profiles = mapping::profile_tools(*tools, *d, th);
        std::map<std::string, int> mix;
        for (const auto& p : profiles) ++mix[std::string(mapping::to_string(p.preference))];
        if (*json) {
          nlohmann::json j;
          j["corun_version"] = std::string(version());
          j["git"] = std::string(git_hash());
          j["device"] = d->name;
          j["thresholds"] = {
              {"gpu_preferred", "cpu_ms / gpu_ms >= " + format_number(*clear)},
              {"cpu_preferred", "cpu_ms / gpu_ms <= 1/" + format_number(*clear)},
              {"device_neutral", "1/" + format_number(*neutral) + " <= cpu_ms / gpu_ms <= " +
                                     format_number(*neutral) + ", or no GPU implementation"},
              {"ambiguous", "otherwise"}};
          nlohmann::json rows = nlohmann::json::array();
          for (const auto& p : profiles) {
            nlohmann::json r = {{"tool", p.tool},
                                {"display_name", p.display_name},
                                {"has_gpu", p.has_gpu},
                                {"cpu_ms", p.cpu_ms},
                                {"speedup", p.speedup},
                                {"vram_gb", p.vram_gb},
                                {"preference", std::string(mapping::to_string(p.preference))},
                                {"transfer_dominated", p.transfer_dominated},
                                {"reason", p.reason}};
            r["gpu_ms"] = p.gpu_ms ? nlohmann::json(*p.gpu_ms) : nlohmann::json(nullptr);
            if (p.gpu_ms) {
              r["gpu_compute_ms"] = p.gpu_compute_ms;
              r["gpu_transfer_ms"] = p.gpu_transfer_ms;
              r["gpu_sm_demand"] = p.sm_demand;
            }
            rows.push_back(r);
          }
          j["tools"] = rows;
          j["mix"] = mix;
          std::printf("%s\n", j.dump(2).c_str());
          return kExitOk;
        }
        Table t({"tool", "cpu ms", "gpu ms", "speedup", "vram GB", "class", "why"});
        for (const auto& p : profiles) {
          t.add({p.tool, fixed(p.cpu_ms, 2), p.gpu_ms ? fixed(*p.gpu_ms, 2) : "-",
                 fixed(p.speedup, 2), fixed(p.vram_gb, 2),
                 std::string(mapping::to_string(p.preference)), p.reason});
        }
        std::printf("%s", t.render().c_str());
        std::printf("device %s:", d->name.c_str());
        for (const auto& [k, v] : mix) std::printf(" %s %d", k.c_str(), v);
        std::printf("\n");
        return kExitOk;
      });
    },
});

}  // namespace
}  // namespace corun::cli::cmd_tools

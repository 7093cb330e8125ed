// corun validate FILE: checks a workload file and summarises it.
#include <cstdio>

#include "command.h"
#include "common.h"

namespace corun::cli::cmd_validate {
namespace {

const bool registered = register_command({
    "validate",
    "Check a workload file: every error names file, line, field and reason (exit 2)",
    [](CLI::App& sub) {
      auto file = std::make_shared<std::string>();
      auto catalog = std::make_shared<std::string>();
      sub.add_option("file", *file, "workload YAML")->required();
      sub.add_option("--catalog", *catalog, kCatalogFlagHelp);
      return std::function<int()>([file, catalog] {
        auto w = load_workload_file(*file, *catalog);
        if (!w) return report_error(w.error());
        const ConfigCount configs = joint_config_count(*w);
        std::printf("%s: ok (%zu models on %s, %s joint configurations)\n", file->c_str(),
                    w->models.size(), w->device.name.c_str(), count_text(configs).c_str());
        return kExitOk;
      });
    },
});

}  // namespace
}  // namespace corun::cli::cmd_validate

// corun knobs: the knob vocabulary, printed from the one declaration table (knob_decls()).
#include <cstdio>

#include "command.h"
#include "common.h"
#include "corun/core/strings.h"
#include "corun/spec/knobs.h"

namespace corun::cli::cmd_knobs {
namespace {

std::string knob_table_markdown() {
  std::string out = "| knob | values | default | applies to | meaning |\n|---|---|---|---|---|\n";
  for (const auto& d : knob_decls()) {
    std::string values;
    if (d.categorical) {
      values = join(precision_names(), ", ");
    } else {
      values = (d.integer ? "integer " : "number ") + format_number(d.min) + ".." +
               format_number(d.max);
    }
    std::vector<std::string> fams;
    for (auto f : d.families) fams.emplace_back(to_string(f));
    out += "| `" + d.name + "` | " + values + " | " + format_knob_value(d.id, d.default_value) +
           " | " + join(fams, ", ") + " | " + d.help + " |\n";
  }
  return out;
}

const bool registered = register_command({
    "knobs",
    "List the knob vocabulary (name, range, default, families) as a Markdown table",
    [](CLI::App&) {
      return std::function<int()>([] {
        std::printf("%s", knob_table_markdown().c_str());
        return kExitOk;
      });
    },
});

}  // namespace
}  // namespace corun::cli::cmd_knobs

// libFuzzer target: the workload parser (YAML text -> Workload), the first thing every verb and
// `corun serve --workload` runs on user input. It must return a workload or an error with a
// message for any bytes, never crash, hang or leak (ASan and UBSan are on in this build).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "corun/catalog/catalog.h"
#include "corun/spec/workload.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto w = corun::parse_workload(text, "fuzz.yaml", corun::Catalog::default_catalog());
  if (!w.ok()) {
    // Every refusal says why, with the file it concerns.
    if (w.error().message().find("fuzz.yaml") == std::string_view::npos) __builtin_trap();
    return 0;
  }
  // What parses is usable: named models, each with at least one local configuration.
  for (const auto& m : w->models) {
    if (m.name.empty() || m.local_config_count() == 0) __builtin_trap();
  }
  return 0;
}

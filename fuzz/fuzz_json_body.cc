// libFuzzer target: a request body of `corun serve` on its way to the planner. The strict JSON
// reader (serve/json_input) either refuses the bytes with a code and the path of the value, or
// returns a document; an object then reaches the workload parser as a model entry in YAML flow,
// as POST /v1/models hands it over. Neither step may crash, hang or leak for any bytes.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <variant>

#include "corun/catalog/catalog.h"
#include "corun/core/yaml.h"
#include "corun/serve/json_input.h"
#include "corun/spec/workload.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto parsed = corun::serve::parse_json_input(text);
  if (const auto* e = std::get_if<corun::serve::JsonInputError>(&parsed)) {
    if (e->code.empty() || e->message.empty()) __builtin_trap();  // a refusal says what and why
    return 0;
  }
  const auto& doc = std::get<nlohmann::json>(parsed);
  if (!doc.is_object()) return 0;
  const std::string yaml = "device: rtx3090\nmodels:\n  - " + corun::serve::to_yaml_flow(doc) + "\n";
  // A document the JSON reader accepted is valid YAML once written as flow: the workload
  // parser may refuse its fields, never its syntax.
  if (!corun::parse_yaml(yaml, "request").ok()) __builtin_trap();
  const auto w = corun::parse_workload(yaml, "request", corun::Catalog::default_catalog());
  if (!w.ok() && w.error().message().empty()) __builtin_trap();
  return 0;
}

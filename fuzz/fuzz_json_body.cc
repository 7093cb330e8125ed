// libFuzzer target: a request body of `corun serve` on its way to the planner. The strict JSON
// reader (serve/json_input) either refuses the bytes with a code and the path of the value, or
// returns a document; an object then reaches the spec reader as one model entry (a YAML node
// that keeps JSON's types), as POST /v1/models hands it over. Neither step may crash, hang or leak for any bytes.
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
  corun::Diagnostics diags;
  const auto m = corun::parse_model_entry(corun::serve::to_yaml_node(doc), "request",
                                          corun::Catalog::default_catalog(), diags);
  // A refusal says why, with the path of each field it blames.
  if (!m && diags.empty()) __builtin_trap();
  for (const auto& d : diags.items()) {
    if (d.reason.empty()) __builtin_trap();
  }
  return 0;
}

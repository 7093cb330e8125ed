// libFuzzer target: a request body of `corun serve` on its way to the planner. The strict JSON
// reader (serve/json_input) either refuses the bytes with a code and the path of the value, or
// returns a document; an object then reaches the spec reader as one model entry (a YAML node
// that keeps JSON's types), as POST /v1/models hands it over. The same bytes are also a
// kube-scheduler ExtenderArgs or ExtenderBindingArgs body of `corun extender` (POST /filter,
// /prioritize and /bind): the extender answers 200 or a 4xx naming the field, never a 500.
// An object is also a POST /v1/tools/place body: it is validated as a tool DAG
// (serve/tool_placement.h), and a refusal is a 4xx with a code and a message. No step may
// crash, hang or leak for any bytes.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <variant>

#include "corun/catalog/catalog.h"
#include "corun/serve/extender.h"
#include "corun/serve/json_input.h"
#include "corun/serve/tool_placement.h"
#include "corun/spec/workload.h"

namespace {

// An extender that knows no node: every candidate is "not a corun node", so a body is parsed
// and answered whole without a connection.
corun::serve::Extender& extender() {
  static const std::unique_ptr<corun::serve::Extender> e = [] {
    auto made = corun::serve::Extender::make({});
    if (!made.ok()) __builtin_trap();
    return std::move(*made);
  }();
  return *e;
}

const corun::mapping::ToolCatalog& tools() {
  static const corun::mapping::ToolCatalog t = [] {
    auto made = corun::mapping::tool_catalog(corun::Catalog::default_catalog());
    if (!made.ok()) __builtin_trap();
    return std::move(*made);
  }();
  return t;
}

void place_request_answers(const nlohmann::json& doc) {
  const auto r = corun::serve::parse_place_request(doc, tools(), "rtx3090");
  if (const auto* e = std::get_if<corun::serve::ApiError>(&r)) {
    if (e->status < 400 || e->status >= 500 || e->code.empty() || e->message.empty()) {
      __builtin_trap();
    }
  }
}

void extender_answers(std::string_view text) {
  for (const char* path : {"/filter", "/prioritize", "/bind"}) {
    corun::serve::HttpRequest req;
    req.method = "POST";
    req.path = path;
    req.content_type = "application/json";
    req.body = std::string(text);
    const auto res = extender().handle(req);
    if (res.status != 200 && (res.status < 400 || res.status >= 500)) __builtin_trap();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  extender_answers(text);
  const auto parsed = corun::serve::parse_json_input(text);
  if (const auto* e = std::get_if<corun::serve::JsonInputError>(&parsed)) {
    if (e->code.empty() || e->message.empty()) __builtin_trap();  // a refusal says what and why
    return 0;
  }
  const auto& doc = std::get<nlohmann::json>(parsed);
  place_request_answers(doc);
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

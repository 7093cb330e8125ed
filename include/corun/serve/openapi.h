#pragma once

#include <string_view>

#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

namespace corun::serve {

/// @brief docs/openapi.yaml as it was when corun was built (compiled in).
std::string_view openapi_yaml();

/// @brief The OpenAPI document as JSON, what `GET /v1/openapi.json` answers (converted once).
const nlohmann::json& openapi_json();

/// @brief A YAML node as JSON under YAML's core schema: plain scalars that read as null, a
/// boolean, an integer or a float become one; quoted scalars and everything else stay strings.
nlohmann::json yaml_to_json(const YAML::Node& node);

}  // namespace corun::serve

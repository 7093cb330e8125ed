#pragma once

#include <string_view>

#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

#include "corun/core/yaml_json.h"

namespace corun::serve {

/// @brief docs/openapi.yaml as it was when corun was built (compiled in).
std::string_view openapi_yaml();

/// @brief The OpenAPI document as JSON, what `GET /v1/openapi.json` answers (converted once).
const nlohmann::json& openapi_json();

/// @brief core/yaml_json.h's, where the serve layer's callers look for it.
using corun::yaml_to_json;

}  // namespace corun::serve

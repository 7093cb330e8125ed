#pragma once

#include <yaml-cpp/yaml.h>

#include <nlohmann/json.hpp>

namespace corun {

/// @brief A YAML node as JSON, plain scalars typed by the YAML 1.2 core schema
/// (https://yaml.org/spec/1.2.2/#1032-tag-resolution: null, booleans, integers, floats, ±.inf)
/// and quoted scalars kept as strings. Thread-safety: pure function.
nlohmann::json yaml_to_json(const YAML::Node& node);

}  // namespace corun

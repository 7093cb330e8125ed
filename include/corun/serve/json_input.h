#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <variant>
#include <yaml-cpp/yaml.h>

namespace corun::serve {

/// @brief Limits a request body must respect beyond RFC 8259's grammar.
struct JsonLimits {
  int max_depth = 16;               ///< nested objects and arrays
  std::size_t max_key_bytes = 128;  ///< every key the API knows is far shorter
};

/// @brief Why a body is not acceptable JSON: an API error code (`bad_json`, `duplicate_key`,
/// `bad_number`), a message, and the path of the value to blame (`demand.fps`, `[3].model`;
/// empty when the text breaks before any value).
struct JsonInputError {
  std::string code;
  std::string message;
  std::string field;
};

/// @brief The largest integer a JSON number keeps exactly everywhere: 2^53 - 1 (RFC 8259 §6,
/// the integers an IEEE-754 double represents exactly and without neighbours).
inline constexpr std::int64_t kMaxExactJsonInteger = (std::int64_t{1} << 53) - 1;

/// @brief Parses a request body as strict JSON (RFC 8259): valid UTF-8, no NaN or Infinity
/// literals (the grammar has none), no number that overflows a double (1e999), no integer
/// beyond ±kMaxExactJsonInteger, no key repeated within an object (RFC 8259 §4 leaves the
/// meaning of duplicates undefined, so a body that has them is refused rather than guessed at),
/// nesting and key length within `limits`. The parse is iterative: no input recurses.
/// @return the document, or the first problem with the path of the value it concerns.
/// Thread-safety: pure function.
std::variant<nlohmann::json, JsonInputError> parse_json_input(std::string_view text,
                                                              const JsonLimits& limits = {});

/// @brief The same value as a YAML node, built in memory (no text in between), that keeps JSON's
/// types under YAML's core schema: strings are tagged `!!str` (so "30" stays a string), numbers
/// `!!int` or `!!float`, booleans `!!bool`, so that the spec reader (core/yaml.h) refuses a value
/// of the wrong JSON type exactly as it refuses a quoted one in a file. Keys are taken as they
/// are (a parsed body has no duplicates). Recursion follows the value's nesting: give it parsed
/// input (bounded by JsonLimits::max_depth). Thread-safety: pure function.
YAML::Node to_yaml_node(const nlohmann::json& value);

}  // namespace corun::serve

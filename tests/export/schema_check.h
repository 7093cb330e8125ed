#pragma once

// A validator for the OpenAPI 3.0 schema subset docs/openapi.yaml uses, for its tests: JSON
// values (nlohmann) against schemas (yaml-cpp nodes), with `$ref` into components. Keywords:
// type, nullable, enum, properties, required, additionalProperties, items, minItems, maxItems,
// minProperties, maxProperties, minimum, maximum, exclusiveMinimum (3.0 boolean form), pattern,
// oneOf, anyOf; annotations (description, example, format, default) are ignored. A schema that
// uses any other keyword is reported, so that a typo cannot switch a check off.

#include <yaml-cpp/yaml.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <string>
#include <vector>

namespace corun::testing {

/// YAML -> JSON with YAML's typing: plain scalars become null, booleans, integers or numbers
/// when they read as such; quoted scalars stay strings.
inline nlohmann::json yaml_to_json(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Sequence: {
      nlohmann::json a = nlohmann::json::array();
      for (const auto& e : n) a.push_back(yaml_to_json(e));
      return a;
    }
    case YAML::NodeType::Map: {
      nlohmann::json o = nlohmann::json::object();
      for (const auto& kv : n) o[kv.first.Scalar()] = yaml_to_json(kv.second);
      return o;
    }
    case YAML::NodeType::Scalar: {
      const std::string& s = n.Scalar();
      if (n.Tag() == "!") return s;  // quoted
      if (s == "null" || s == "~") return nullptr;
      if (s == "true") return true;
      if (s == "false") return false;
      static const std::regex integer("^-?[0-9]+$");
      static const std::regex number("^-?[0-9]*\\.?[0-9]+([eE][-+]?[0-9]+)?$");
      if (std::regex_match(s, integer)) return std::stoll(s);
      if (std::regex_match(s, number)) return std::stod(s);
      return s;
    }
    default:
      return nullptr;
  }
}

/// An OpenAPI document: schema lookup and validation.
class OpenApiDoc {
 public:
  explicit OpenApiDoc(YAML::Node root) : root_(std::move(root)) {}

  [[nodiscard]] const YAML::Node& root() const { return root_; }

  /// `#/components/schemas/NAME` (undefined node when absent).
  [[nodiscard]] YAML::Node schema(const std::string& name) const {
    return root_["components"]["schemas"][name];
  }

  /// Follows `$ref` (local references only) until a node without one. (Nodes are never
  /// assigned to: yaml-cpp's assignment writes through to the document.)
  [[nodiscard]] YAML::Node resolve(const YAML::Node& n, int depth = 0) const {
    if (depth > 16 || !n.IsMap() || !n["$ref"]) return n;
    const std::string ref = n["$ref"].as<std::string>();
    if (ref.rfind("#/", 0) != 0) return YAML::Node();
    std::vector<std::string> parts;
    std::size_t pos = 2;
    while (true) {
      const auto next = ref.find('/', pos);
      parts.push_back(ref.substr(pos, next == std::string::npos ? std::string::npos : next - pos));
      if (next == std::string::npos) break;
      pos = next + 1;
    }
    const YAML::Node target = lookup(root_, parts, 0);
    if (!target) return YAML::Node();
    return resolve(target, depth + 1);
  }

  /// Keywords of `schema` and its subschemas that the validator does not know.
  [[nodiscard]] std::vector<std::string> unknown_keywords(const YAML::Node& schema,
                                                          const std::string& path) const {
    std::vector<std::string> out;
    if (!schema.IsMap()) return out;
    for (const auto& kv : schema) {
      const std::string k = kv.first.Scalar();
      if (k != "$ref" && known_keywords().count(k) == 0) out.push_back(path + ": " + k);
    }
    if (schema["properties"]) {
      for (const auto& kv : schema["properties"]) {
        const auto sub = unknown_keywords(kv.second, path + "." + kv.first.Scalar());
        out.insert(out.end(), sub.begin(), sub.end());
      }
    }
    for (const char* key : {"items", "additionalProperties"}) {
      if (!schema[key]) continue;
      const auto sub = unknown_keywords(schema[key], path + "." + key);
      out.insert(out.end(), sub.begin(), sub.end());
    }
    for (const char* key : {"oneOf", "anyOf"}) {
      if (!schema[key]) continue;
      for (const auto& alt : schema[key]) {
        const auto sub = unknown_keywords(alt, path + "." + key);
        out.insert(out.end(), sub.begin(), sub.end());
      }
    }
    return out;
  }

  /// Every problem of `v` against `schema`, each "PATH: reason". A string "..." is a
  /// documentation placeholder and matches any string schema.
  [[nodiscard]] std::vector<std::string> validate(const nlohmann::json& v, const YAML::Node& schema,
                                                  const std::string& path = "$") const {
    std::vector<std::string> errors;
    check(v, schema, path, errors);
    return errors;
  }

 private:
  static const std::set<std::string>& known_keywords() {
    static const std::set<std::string> known = {"type",          "nullable",
                                                "enum",          "properties",
                                                "required",      "additionalProperties",
                                                "items",         "minItems",
                                                "maxItems",      "minProperties",
                                                "maxProperties", "minimum",
                                                "maximum",       "exclusiveMinimum",
                                                "pattern",       "oneOf",
                                                "anyOf",         "description",
                                                "example",       "format",
                                                "default",       "title"};
    return known;
  }

  static YAML::Node lookup(const YAML::Node& n, const std::vector<std::string>& parts,
                           std::size_t i) {
    if (i == parts.size()) return n;
    const YAML::Node child = n[parts[i]];
    if (!child) return YAML::Node();
    return lookup(child, parts, i + 1);
  }

  static bool is_integer(const nlohmann::json& v) {
    if (v.is_number_integer() || v.is_number_unsigned()) return true;
    return v.is_number_float() && std::floor(v.get<double>()) == v.get<double>();
  }

  static bool has_type(const nlohmann::json& v, const std::string& t) {
    if (t == "object") return v.is_object();
    if (t == "array") return v.is_array();
    if (t == "string") return v.is_string();
    if (t == "boolean") return v.is_boolean();
    if (t == "number") return v.is_number();
    if (t == "integer") return v.is_number() && is_integer(v);
    return false;
  }

  void check(const nlohmann::json& v, const YAML::Node& schema, const std::string& path,
             std::vector<std::string>& errors) const {
    if (schema.IsMap() && schema["$ref"]) {
      const YAML::Node target = resolve(schema);
      if (!target) {
        errors.push_back(path + ": unresolvable $ref " + schema["$ref"].as<std::string>());
        return;
      }
      check(v, target, path, errors);
      return;
    }
    if (!schema.IsMap()) {
      errors.push_back(path + ": schema is not a mapping");
      return;
    }
    for (const auto& kv : schema) {
      if (known_keywords().count(kv.first.Scalar()) == 0) {
        errors.push_back(path + ": unknown schema keyword '" + kv.first.Scalar() + "'");
      }
    }
    if (v.is_null()) {
      if (schema["nullable"] && schema["nullable"].as<bool>()) return;
      if (!schema["type"] && !schema["oneOf"] && !schema["anyOf"]) return;
    }
    const bool placeholder = v.is_string() && v.get<std::string>() == "...";
    if (schema["oneOf"] || schema["anyOf"]) {
      const bool one = static_cast<bool>(schema["oneOf"]);
      int matches = 0;
      std::vector<std::string> all;
      for (const auto& alt : one ? schema["oneOf"] : schema["anyOf"]) {
        std::vector<std::string> e;
        check(v, alt, path, e);
        if (e.empty()) ++matches;
        all.insert(all.end(), e.begin(), e.end());
      }
      if (matches == 0) {
        errors.push_back(path + ": matches none of the alternatives (" +
                         (all.empty() ? std::string() : all.front()) + ")");
      } else if (one && matches > 1) {
        errors.push_back(path + ": matches " + std::to_string(matches) + " oneOf alternatives");
      }
    }
    if (schema["type"]) {
      const std::string t = schema["type"].as<std::string>();
      if (!has_type(v, t)) {
        errors.push_back(path + ": expected " + t + ", got " + v.type_name());
        return;
      }
    }
    if (schema["enum"] && !placeholder) {
      bool found = false;
      for (const auto& e : schema["enum"]) found = found || yaml_to_json(e) == v;
      if (!found) errors.push_back(path + ": " + v.dump() + " is not one of the enum values");
    }
    if (v.is_string() && schema["pattern"] && !placeholder) {
      const std::regex re(schema["pattern"].as<std::string>());
      if (!std::regex_search(v.get<std::string>(), re)) {
        errors.push_back(path + ": '" + v.get<std::string>() + "' does not match " +
                         schema["pattern"].as<std::string>());
      }
    }
    if (v.is_number()) {
      const double x = v.get<double>();
      const bool exclusive = schema["exclusiveMinimum"] && schema["exclusiveMinimum"].as<bool>();
      if (schema["minimum"]) {
        const double min = schema["minimum"].as<double>();
        if (x < min || (exclusive && x == min)) {
          errors.push_back(path + ": " + v.dump() + " is below the minimum");
        }
      }
      if (schema["maximum"] && x > schema["maximum"].as<double>()) {
        errors.push_back(path + ": " + v.dump() + " is above the maximum");
      }
    }
    if (v.is_array()) {
      if (schema["minItems"] && v.size() < schema["minItems"].as<std::size_t>()) {
        errors.push_back(path + ": fewer items than minItems");
      }
      if (schema["maxItems"] && v.size() > schema["maxItems"].as<std::size_t>()) {
        errors.push_back(path + ": more items than maxItems");
      }
      if (schema["items"]) {
        for (std::size_t i = 0; i < v.size(); ++i) {
          check(v[i], schema["items"], path + "[" + std::to_string(i) + "]", errors);
        }
      }
    }
    if (v.is_object()) {
      if (schema["minProperties"] && v.size() < schema["minProperties"].as<std::size_t>()) {
        errors.push_back(path + ": fewer properties than minProperties");
      }
      if (schema["maxProperties"] && v.size() > schema["maxProperties"].as<std::size_t>()) {
        errors.push_back(path + ": more properties than maxProperties");
      }
      if (schema["required"]) {
        for (const auto& r : schema["required"]) {
          if (!v.contains(r.as<std::string>())) {
            errors.push_back(path + ": missing required property '" + r.as<std::string>() + "'");
          }
        }
      }
      const YAML::Node props = schema["properties"];
      const YAML::Node extra = schema["additionalProperties"];
      for (const auto& [k, item] : v.items()) {
        if (props && props[k]) {
          check(item, props[k], path + "." + k, errors);
        } else if (extra && extra.IsScalar()) {
          if (!extra.as<bool>()) errors.push_back(path + ": undocumented property '" + k + "'");
        } else if (extra) {
          check(item, extra, path + "." + k, errors);
        }
      }
    }
  }

  YAML::Node root_;
};

}  // namespace corun::testing

#pragma once

// Private to the serve layer: the member lookup of Kubernetes objects as Go's encoding/json
// finds struct fields, shared by the extender (extender.cc) and its Kubernetes discovery
// (kube_discovery.cc).

#include <cctype>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace corun::serve::detail {

inline std::string lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// The member `key` of a JSON object as Go's encoding/json decoder finds a struct field: an
// exact match first, else one that matches ignoring (ASCII) case. Null: absent.
inline const nlohmann::json* member(const nlohmann::json& object, std::string_view key) {
  if (!object.is_object()) return nullptr;
  if (const auto it = object.find(std::string(key)); it != object.end()) return &*it;
  const std::string want = lower(key);
  for (const auto& [k, v] : object.items()) {
    if (lower(k) == want) return &v;
  }
  return nullptr;
}

}  // namespace corun::serve::detail

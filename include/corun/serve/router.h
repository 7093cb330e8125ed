#pragma once

#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "corun/serve/http.h"

namespace corun::serve {

/// @brief Who may call a route.
enum class Access {
  kOpen,   ///< anyone (reads, and what-if questions, which change nothing)
  kToken,  ///< only a client with the service's bearer token (mutations)
};

/// @brief What a route reads from the request body.
enum class BodyUse {
  kNone,          ///< nothing (a body is ignored)
  kJson,          ///< a strict JSON body (serve/json_input.h), required
  kOptionalJson,  ///< a strict JSON body when one is sent
};

/// @brief One request on its way to a handler: the request, the `{name}` segment of the
/// route's pattern (if it has one) and the parsed body (null when the route reads none).
struct RouteCall {
  const HttpRequest& request;
  std::string name;
  nlohmann::json body;
};

/// @brief One row of an API's route table: everything routing, authentication, body parsing
/// and the request metrics need to know of a route lives here, once.
/// @tparam Target the class whose member function handles the route.
template <class Target>
struct Route {
  std::string_view method;   ///< "GET", "POST", ...
  std::string_view pattern;  ///< "/v1/models/{name}/demand": literal segments and one {name}
  std::string_view label;    ///< the route label of the request metrics (several rows may share it)
  Access access;
  BodyUse body;
  /// Prefix of the field named in a body error ("demand" when the body is a part of an entry,
  /// so that errors name fields as the entry's validation does); empty for whole bodies.
  std::string_view body_field;
  HttpResponse (Target::*handler)(const RouteCall&);
};

/// @brief Whether `path` (no trailing '/', no query) matches `pattern`; a `{name}` segment of
/// the pattern matches any one non-empty segment, which is stored in `captured`.
/// Thread-safety: pure function.
bool match_route_pattern(std::string_view pattern, std::string_view path, std::string& captured);

/// @brief How a request resolves against a route table.
template <class Target>
struct RouteLookup {
  const Route<Target>* route = nullptr;  ///< the row to call (null: see `allowed`)
  std::string captured;                  ///< its {name} segment
  /// No row for the method: the methods the path allows (empty: no row for the path at all).
  std::vector<std::string> allowed;
  std::string_view label;  ///< metric label of the path's rows (empty when no row matched)
};

/// @brief Finds the row for `method` and `path`. Thread-safety: pure function.
template <class Target>
RouteLookup<Target> lookup_route(std::span<const Route<Target>> routes, std::string_view method,
                                 std::string_view path) {
  RouteLookup<Target> out;
  std::string captured;
  for (const auto& r : routes) {
    if (!match_route_pattern(r.pattern, path, captured)) continue;
    if (out.label.empty()) out.label = r.label;
    if (r.method == method) {
      out.route = &r;
      out.captured = std::move(captured);
      out.allowed.clear();
      out.label = r.label;
      return out;
    }
    out.allowed.emplace_back(r.method);
  }
  return out;
}

/// @brief The distinct labels of a route table, in table order (the request metrics' labels).
/// Thread-safety: pure function.
template <class Target>
std::vector<std::string> route_labels(std::span<const Route<Target>> routes) {
  std::vector<std::string> out;
  for (const auto& r : routes) {
    bool seen = false;
    for (const auto& l : out) seen = seen || l == r.label;
    if (!seen) out.emplace_back(r.label);
  }
  return out;
}

}  // namespace corun::serve

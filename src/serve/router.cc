#include "corun/serve/router.h"

namespace corun::serve {

bool match_route_pattern(std::string_view pattern, std::string_view path, std::string& captured) {
  captured.clear();
  while (!pattern.empty() || !path.empty()) {
    if (pattern.empty() || path.empty() || pattern[0] != '/' || path[0] != '/') return false;
    pattern.remove_prefix(1);
    path.remove_prefix(1);
    const std::size_t p = std::min(pattern.find('/'), pattern.size());
    const std::size_t q = std::min(path.find('/'), path.size());
    const std::string_view want = pattern.substr(0, p);
    const std::string_view got = path.substr(0, q);
    if (want == "{name}") {
      if (got.empty()) return false;
      captured = std::string(got);
    } else if (want != got) {
      return false;
    }
    pattern.remove_prefix(p);
    path.remove_prefix(q);
  }
  return true;
}

}  // namespace corun::serve

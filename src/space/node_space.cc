#include "corun/space/node_space.h"

namespace corun {

ConfigCount placement_count(const Workload& w, const NodeLayout& layout) {
  std::vector<std::size_t> choices;
  for (std::size_t m = 0; m < w.models.size(); ++m) {
    if (!w.models[m].active) continue;
    std::size_t n = 0;
    for (const auto& u : layout.units) n += pin_allows(w, m, u) ? 1 : 0;
    choices.push_back(n);
  }
  return ConfigCount::product(choices);
}

}  // namespace corun

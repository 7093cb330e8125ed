#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "corun/plan/predictor.h"

namespace corun {

/// @brief A predictor seen in another numbering of the local configurations: local
/// configuration l of model m is the inner predictor's `map[m][l]`. Used where a workload is
/// viewed with fewer or reordered configurations than the predictor was built for (a
/// registration whose knobs came in another order, a model pinned to one configuration). An
/// AggregatePredictor inner gives an AggregatePredictor (same aggregate, same monotonicity).
std::unique_ptr<Predictor> make_renumbered(std::shared_ptr<const Predictor> inner,
                                           std::vector<std::vector<std::int32_t>> map);

/// @brief A non-owning handle for make_renumbered (the predictor must outlive the view).
inline std::shared_ptr<const Predictor> borrowed(const Predictor& p) {
  return std::shared_ptr<const Predictor>(&p, [](const Predictor*) {});
}

}  // namespace corun

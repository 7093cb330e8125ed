#pragma once

#include "corun/space/space.h"
#include "corun/spec/node.h"

namespace corun {

/// @brief Number of ways to assign the workload's active models to the units of `layout`,
/// each model to a unit its pin allows (VRAM is not checked).
ConfigCount placement_count(const Workload& w, const NodeLayout& layout);

}  // namespace corun

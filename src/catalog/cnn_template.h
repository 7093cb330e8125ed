#pragma once

// Internal to the catalog layer: CNN architectures written once as a block graph (the way
// Ultralytics model YAMLs are) and expanded, per scale, into the flat ConvLayer list that the
// cost model reads.

#include <string>
#include <vector>

#include "corun/catalog/model.h"
#include "corun/core/result.h"

namespace corun::detail {

/// @brief Block types of a CNN template; semantics follow ultralytics/nn/modules.
enum class CnnBlockKind { kConv, kC3k2, kSppf, kC2psa, kUpsample, kConcat, kDetect };

/// @brief One block of a template, before the scale multiples are applied.
struct CnnBlock {
  CnnBlockKind kind = CnnBlockKind::kConv;
  std::vector<int> from = {-1};  ///< input blocks: negative = relative, else absolute index
  int repeats = 1;               ///< before the depth multiple
  int out = 0;                   ///< output channels before the width multiple
  int kernel = 1;
  int stride = 1;       ///< the block's own stride (conv)
  bool c3k = false;     ///< C3k2: C3k inner blocks instead of bottlenecks
  double expand = 0.5;  ///< C3k2: hidden channels = out * expand
  int classes = 80;     ///< Detect
};

/// @brief A named block graph (catalog `cnn_templates` entry).
struct CnnTemplate {
  std::string name;
  std::vector<CnnBlock> blocks;
};

/// @brief A model's scale multiples (Ultralytics `scales`: depth, width, max_channels), plus
/// Ultralytics' rule that the m/l/x scales use C3k in every C3k2.
struct CnnScale {
  double depth = 1;
  double width = 1;
  int max_channels = 1 << 20;
  bool force_c3k = false;
};

/// @brief The flattened network: convolutions plus the count of other kernels.
struct CnnExpansion {
  std::vector<ConvLayer> layers;
  int aux_kernels = 0;
};

/// @brief Expands `t` at scale `s` for an input of `in_channels` channels. Fails (with a
/// message naming the block) on a graph that does not connect: bad `from`, mismatched strides.
Result<CnnExpansion> expand_cnn_template(const CnnTemplate& t, const CnnScale& s,
                                         int in_channels = 3);

}  // namespace corun::detail

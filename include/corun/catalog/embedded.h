#pragma once

#include <string_view>
#include <vector>

namespace corun {

/// @brief A catalog YAML file compiled into the binary (see cmake/EmbedCatalog.cmake).
struct EmbeddedFile {
  std::string_view name;     ///< file name, e.g. "devices.yaml"
  std::string_view content;  ///< the whole file
};

/// @brief Every catalog/*.yaml file as it was at build time.
const std::vector<EmbeddedFile>& embedded_catalog_files();

}  // namespace corun

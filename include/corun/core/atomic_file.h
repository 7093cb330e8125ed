#pragma once

#include <filesystem>
#include <string_view>

#include "corun/core/result.h"

namespace corun {

/// @brief Writes `content` to `path` so that readers see either the old file or the whole new
/// one: write to a temporary file in the same directory, fsync, then rename over `path`.
Status write_file_atomic(const std::filesystem::path& path, std::string_view content);

/// @brief Reads a whole file. Errors name the path and the reason.
Result<std::string> read_file(const std::filesystem::path& path);

}  // namespace corun

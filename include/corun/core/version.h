#pragma once

#include <string_view>

namespace corun {

/// @brief corun's semantic version, stamped into every file corun writes.
std::string_view version();

/// @brief The git commit corun was built from ("unknown" outside a checkout).
std::string_view git_hash();

}  // namespace corun

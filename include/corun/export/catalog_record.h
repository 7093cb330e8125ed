#pragma once

// The catalog a plan file was made with. `corun run` (report.json) and `corun plan --json`
// record the catalog overlay they loaded, so that `corun export` and `corun map --plan` read
// the plan against the same catalog without a second --catalog flag:
//
//   "catalog": {"overlay": "/abs/path/my-catalog", "hash": "3f2a...16 hex digits"}
//   "catalog": {"overlay": null}                      (the built-in catalog alone)
//
// A file without `catalog` (written before it existed) reads as the built-in catalog.

#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "corun/catalog/catalog.h"
#include "corun/core/result.h"

namespace corun::exporting {

/// @brief The `catalog` member a plan file records for `catalog` (see the file comment).
nlohmann::json catalog_record_json(const Catalog& catalog);

/// @brief The overlay a plan file's text records, or nullopt when it records none (the
/// built-in catalog, or an older file). Text that is not a JSON object also yields nullopt:
/// reading the plan itself reports that, with its own message.
/// @return an Error (kInvalidInput) naming `plan_file` and the field when `catalog` is present
/// but malformed
Result<std::optional<CatalogOverlay>> read_catalog_record(std::string_view plan_text,
                                                          const std::string& plan_file);

/// @brief Checks the catalog loaded from a recorded overlay's directory against the record.
/// @return "" when the overlay's content hash is unchanged, else a warning line that names the
/// plan file, the directory and both hashes
std::string overlay_change_warning(const CatalogOverlay& recorded, const Catalog& loaded,
                                   const std::string& plan_file);

}  // namespace corun::exporting

#pragma once

#include <string>
#include <vector>

#include "corun/export/export.h"
#include "corun/spec/knobs.h"

namespace corun::exporting {

/// @brief How one knob reaches one format: the flags, fields or variables that carry it, or,
/// when `target` is empty, why it does not apply. One entry per (format, knob): a test walks
/// knob_decls() so that a new knob cannot be left out, and docs/export.md prints this table.
struct KnobExport {
  ExportFormat format;
  KnobId knob;
  std::string target;  ///< e.g. "`--max-num-seqs`"; empty = not applicable
  std::string note;    ///< how the value is derived, or why the knob does not apply

  /// @brief Whether the knob changes what this format writes.
  [[nodiscard]] bool exported() const { return !target.empty(); }
};

/// @brief The table, ordered by format then knob.
const std::vector<KnobExport>& knob_exports();

/// @brief The Markdown table of docs/export.md (between its `export-knobs` markers).
std::string knob_export_table_markdown();

}  // namespace corun::exporting

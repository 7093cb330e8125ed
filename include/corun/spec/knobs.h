#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "corun/catalog/model.h"
#include "corun/catalog/precision.h"

namespace corun {

/// @brief Every knob corun knows. Declared once in knob_decls(); parsing, validation,
/// `corun knobs` and docs/formats.md derive from that table.
enum class KnobId {
  kPrecision,
  kBatch,
  kSmShare,
  kRequestConcurrency,
  kImgsz,
  kSkipRate,
  kPrefillChunk,
};

/// @brief The declaration of one knob: name, type, range, default, which families use it.
struct KnobDecl {
  KnobId id;
  std::string name;
  bool categorical = false;  ///< values are names (precision), stored as enum ordinals
  bool integer = false;
  double min = 0;
  double max = 0;
  double default_value = 0;
  std::vector<ModelFamily> families;  ///< families for which the knob means something
  std::string help;
};

/// @brief The knob table, in KnobId order.
const std::vector<KnobDecl>& knob_decls();
const KnobDecl& knob_decl(KnobId id);
std::optional<KnobId> find_knob(std::string_view name);
/// @brief All knob names, for suggestions.
const std::vector<std::string>& knob_names();

/// @brief One value for every knob of one model: a local configuration resolved against the
/// defaults. This is what testbeds consume.
struct Settings {
  Precision precision = Precision::kFp16;
  int batch = 1;
  double sm_share = 100;  ///< MPS active-thread percentage, 1..100 (a cap, not a reservation)
  int request_concurrency = 1;
  int imgsz = 640;
  double skip_rate = 0;  ///< fraction of frames dropped before inference
  int prefill_chunk = 2048;

  /// @brief Sets knob `id` from its numeric encoding (precision: the enum ordinal).
  void set(KnobId id, double value);
  [[nodiscard]] double get(KnobId id) const;
};

/// @brief "640", "0.33", "awq": a knob value as a user writes it.
std::string format_knob_value(KnobId id, double value);

}  // namespace corun

#pragma once

// A request trace read once from a file and asked for the demand of a window of time.
//
// Format: the Azure LLM inference trace (Azure/AzurePublicDataset, 2023 and 2024): a header
// naming the columns TIMESTAMP, ContextTokens and GeneratedTokens (in any order), then one
// request per line, e.g. `2023-11-16 18:17:03.9799600,4808,10`. Timestamps are wall-clock times
// `YYYY-MM-DD HH:MM:SS` with up to nine fraction digits and no zone; only their differences
// matter. Rows may come in any order (they are sorted by time).
//
// Statistics of a window [from, to): the rate is its request count over its length; the token
// lengths are the means of its requests; the burstiness is the coefficient of variation of the
// gaps between its consecutive arrivals (population standard deviation over mean: 1 for a Poisson
// process, 0 for a periodic one, above 1 for bursts). Gaps across the window's edges are not
// counted: a window's telemetry sees only its own arrivals.

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "corun/core/result.h"
#include "corun/core/yaml.h"

namespace corun {

/// @brief One request of a trace: when it arrived (seconds after the trace's first request) and
/// its prompt and output lengths in tokens.
struct TraceRequest {
  double t_s = 0;
  int context_tokens = 0;
  int generated_tokens = 0;
};

/// @brief What the requests of one window of a trace show.
struct TraceWindow {
  std::size_t requests = 0;
  double rps = 0;                    ///< requests over the window's length
  double mean_context_tokens = 0;    ///< 0 when the window has no request
  double mean_generated_tokens = 0;  ///< 0 when the window has no request
  /// Coefficient of variation of the gaps between consecutive arrivals in the window; 1 (the
  /// Poisson value: no evidence either way) when it has fewer than three arrivals or all of them
  /// at one instant.
  double arrival_cv = 1;
};

/// @brief A request trace in the Azure LLM inference trace format, sorted by arrival time.
/// Immutable once read; thread-safety: const member functions may be called concurrently.
///
/// @code
///   auto trace = DemandTrace::load("workloads/traces/data/azure-code-2023-excerpt.csv");
///   if (!trace) return trace.error();              // file:line: column: reason, one per line
///   const TraceWindow w = trace->window(10, 20);   // the requests of seconds [10, 20)
///   // w.rps, w.mean_context_tokens, w.mean_generated_tokens, w.arrival_cv
/// @endcode
class DemandTrace {
 public:
  /// @brief The column names a trace's header must hold.
  static constexpr std::string_view kTimestamp = "TIMESTAMP";
  static constexpr std::string_view kContextTokens = "ContextTokens";
  static constexpr std::string_view kGeneratedTokens = "GeneratedTokens";

  /// @brief Parses a trace's text. Every problem is added to `diags` as `file:line: column:
  /// reason` (at most 20 lines of them, then a count of the rest).
  /// @return the trace, or none when anything was reported.
  static std::optional<DemandTrace> parse(std::string_view text, const std::string& file,
                                          Diagnostics& diags);
  /// @brief Reads and parses a trace file. Errors: kNotFound/kIo when it cannot be read,
  /// kInvalidInput (every problem, one per line) when it does not parse.
  static Result<DemandTrace> load(const std::filesystem::path& path);

  /// @brief The requests, by arrival time; the first arrives at 0.
  [[nodiscard]] const std::vector<TraceRequest>& requests() const { return requests_; }
  /// @brief Seconds from the first request to the last.
  [[nodiscard]] double span_s() const { return requests_.empty() ? 0 : requests_.back().t_s; }
  /// @brief What the requests arriving in [from_s, to_s) show (trace seconds; to_s > from_s).
  [[nodiscard]] TraceWindow window(double from_s, double to_s) const;
  /// @brief FNV-1a of the text it was parsed from: a workload replaying it is another workload
  /// when the trace changes (Workload::hash folds it in).
  [[nodiscard]] std::uint64_t text_hash() const { return text_hash_; }

 private:
  std::vector<TraceRequest> requests_;
  std::uint64_t text_hash_ = 0;
};

}  // namespace corun

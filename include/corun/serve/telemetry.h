#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

#include "corun/runtime/controller.h"
#include "corun/serve/api_error.h"
#include "corun/spec/workload.h"

namespace corun::serve {

/// @brief One telemetry sample of POST /v1/telemetry (docs/serve.md): what a model measured,
/// optionally under which plan. Metrics are in the units their names say.
struct TelemetrySample {
  std::string model;
  std::optional<std::int64_t> plan_id;  ///< none: the plan in force
  std::optional<double> latency_ms_p50, latency_ms_p95, ttft_ms_p95, tpot_ms_p95, throughput;

  /// @brief The sample as the controller observes it: model `model_index` in local
  /// configuration `local`.
  [[nodiscard]] ModelObservation observation(std::size_t model_index, std::int32_t local) const;
  /// @brief The measured fields as JSON (GET /v1/telemetry's "last").
  [[nodiscard]] nlohmann::json to_json() const;
};

/// @brief At most this many samples per POST (larger batches are answered 413).
inline constexpr std::size_t kMaxSamplesPerPost = 256;

/// @brief Validates a telemetry body, a sample object or a non-empty array of at most
/// kMaxSamplesPerPost, before anything changes: every field known, metrics numbers in
/// [0, 1e9], plan ids integers, a model name and at least one metric per sample. Errors name
/// the field (`[3].throughput`). Thread-safety: pure function.
std::variant<std::vector<TelemetrySample>, ApiError> parse_telemetry(const nlohmann::json& body);

/// @brief What telemetry said of each registered model: sample, breach and stale counts and the
/// last sample (the learning state is the controller's), and whether that changed since it was
/// last flushed to the state store. Thread-safety: none; the service guards it with its state
/// lock.
class TelemetryLedger {
 public:
  /// @brief One model's counts.
  struct Counts {
    std::uint64_t samples = 0;
    std::uint64_t breaches = 0;
    std::uint64_t stale = 0;  ///< samples for another plan than the one in force
    nlohmann::json last;      ///< last observed sample
  };

  /// @brief Starts counting for a model (zero counts).
  void track(const std::string& model) { counts_[model] = Counts{}; }
  /// @brief Forgets a removed model.
  void forget(const std::string& model) { counts_.erase(model); }
  /// @brief Reloads a tracked model's counts from a stored summary (to_json() text); an
  /// untracked model or a summary that is not a JSON object is skipped.
  void restore(const std::string& model, const std::string& summary);
  /// @brief Records one sample of a tracked model: `stale` when it was measured under another
  /// plan, `breach` when it broke the model's SLA.
  void record(const TelemetrySample& sample, bool stale, bool breach);
  /// @brief The counts of a tracked model.
  [[nodiscard]] const Counts& at(const std::string& model) const { return counts_.at(model); }
  /// @brief A model's counts as JSON ({samples, breaches, stale, last}).
  [[nodiscard]] nlohmann::json to_json(const std::string& model) const;
  /// @brief (model, summary JSON) of every model when anything changed since the last call
  /// (and marks the ledger clean); empty otherwise.
  [[nodiscard]] std::vector<std::pair<std::string, std::string>> take_dirty();
  /// @brief Marks the ledger changed again (a flush that failed is retried).
  void mark_dirty() { dirty_ = true; }

 private:
  std::unordered_map<std::string, Counts> counts_;
  bool dirty_ = false;
};

}  // namespace corun::serve

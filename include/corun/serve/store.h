#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "corun/core/result.h"

struct sqlite3;

namespace corun::serve {

/// @brief One registered model as stored: its name, the registration JSON (the workload
/// `models` entry, with demand updates applied) and its registration order.
struct StoredModel {
  std::string name;
  std::string spec_json;
  std::int64_t seq = 0;
};

/// @brief One plan as stored: its id and its JSON record (see docs/serve.md, "plan").
struct StoredPlan {
  std::int64_t id = 0;
  std::string record_json;
};

/// @brief Everything a restarted server reloads.
struct StoredState {
  std::string device;               ///< device the state was created with ("" = new)
  std::vector<StoredModel> models;  ///< in registration order
  std::vector<StoredPlan> plans;    ///< the most recent ones, oldest first
  std::vector<std::pair<std::string, std::string>> telemetry;  ///< model -> summary JSON
  std::vector<std::string> learning;  ///< learning samples (JSON), in the order they were learned
};

/// @brief The serve layer's durable state: one SQLite database (`serve.db`, WAL journal) under
/// the state directory. Registrations and plans are written with `synchronous=FULL` and are
/// committed before a call returns, so whatever a caller acknowledges survives `kill -9` and
/// power loss. Telemetry summaries and learning samples go through a second connection with
/// `synchronous=NORMAL` (they survive a killed process; on power loss the last commits may be
/// lost).
/// Thread-safety: every method may be called from any thread; calls are serialised per
/// connection.
class StateStore {
 public:
  /// @brief Current schema version (table `schema_version`).
  static constexpr int kSchemaVersion = 2;

  /// @brief Opens (creating if needed) `dir/serve.db`. Refuses a file SQLite finds damaged
  /// (PRAGMA quick_check) or written by a newer schema, with kind kDamaged; an empty file is a
  /// new state (what a crash while creating it leaves).
  static Result<std::unique_ptr<StateStore>> open(const std::filesystem::path& dir);
  ~StateStore();
  StateStore(const StateStore&) = delete;
  StateStore& operator=(const StateStore&) = delete;

  /// @brief Loads models, the last `max_plans` plans and the telemetry summaries. A row whose
  /// JSON does not read back, or a scan SQLite stops on a damaged page, is an error of kind
  /// kDamaged naming the file: never a partial state.
  Result<StoredState> load(std::size_t max_plans) const;
  /// @brief Records the device name the state belongs to (first start only).
  Status set_device(const std::string& device);
  /// @brief Inserts a model; fails (kInvalidInput) if the name exists.
  Status insert_model(const std::string& name, const std::string& spec_json);
  /// @brief Replaces a model's registration JSON (demand updates).
  Status update_model(const std::string& name, const std::string& spec_json);
  /// @brief Removes a model.
  Status delete_model(const std::string& name);
  /// @brief Appends a plan record under its decision number (the history's order; a record
  /// stored before decisions were numbered is keyed by its plan id, which they continue).
  Status append_plan(std::int64_t decision, const std::string& record_json);
  /// @brief Replaces the telemetry summaries in one transaction.
  Status save_telemetry(const std::vector<std::pair<std::string, std::string>>& summaries);
  /// @brief Appends learning samples (JSON) in one transaction, committed before it returns:
  /// what a telemetry post taught survives a killed process once it is acknowledged.
  Status append_learning(const std::vector<std::string>& samples);

 private:
  StateStore() = default;

  std::filesystem::path file_;    ///< dir/serve.db, named in every error
  sqlite3* durable_ = nullptr;    ///< registrations and plans: synchronous=FULL
  sqlite3* telemetry_ = nullptr;  ///< telemetry summaries: synchronous=NORMAL
  mutable std::mutex durable_mutex_;
  mutable std::mutex telemetry_mutex_;
};

}  // namespace corun::serve

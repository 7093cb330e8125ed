#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "corun/core/context.h"
#include "corun/core/result.h"
#include "corun/profile/plan.h"
#include "corun/testbed/testbed.h"

struct sqlite3;

namespace corun::profile {

/// @brief Version of the SQLite layout below. Bump it whenever a table or column changes; a
/// dataset written under another version is refused with a message instead of misread.
inline constexpr int kDatasetSchemaVersion = 1;

/// @brief What identifies a campaign. The budget is not part of the identity: budgets nest
/// (see plan_sample), so rerunning with a larger budget extends the same campaign.
struct CampaignSpec {
  Plan plan = Plan::kStandalone;
  /// What the campaign draws from: its seed is part of its identity (its threads are not).
  Context context;
  std::string testbed = "sim";
  double window_s = 10;
};

/// @brief A stored campaign and its provenance.
struct CampaignInfo {
  std::int64_t id = 0;
  CampaignSpec spec;
  std::uint64_t total_samples = 0;   ///< the largest plan size requested so far
  std::uint64_t stored_samples = 0;  ///< samples present in the dataset
  std::string device;
  std::string workload_hash;
  std::string workload_name;
  /// The path the workload was read from when the campaign was stored: a trace demand it
  /// replays (ModelSpec::trace) is named relative to it.
  std::string workload_file;
  std::string corun_version;
  std::string git_hash;
  int schema_version = 0;
  std::string created_utc;
};

/// @brief One measured sample: the joint configuration, the seed of its noise and what the
/// testbed observed (failures included: Measurement::error and ModelMetrics::error).
struct SampleRecord {
  std::uint64_t index = 0;
  JointConfig config;
  std::uint64_t measurement_seed = 0;
  Measurement measurement;
};

/// @brief Profiling measurements in one SQLite file (WAL journal). Each sample is written in
/// one transaction with INSERT OR IGNORE keyed by (campaign, sample, model), so a process
/// killed at any instant leaves whole samples only, and a rerun never duplicates one.
/// Not thread-safe: one Dataset per thread (several processes may open the same file).
class Dataset {
 public:
  enum class Mode { kCreate, kReadOnly };

  /// @brief Opens (and with kCreate, creates) a dataset. Refuses, with kind kDamaged and the
  /// file named, a file SQLite finds damaged (PRAGMA quick_check), one of another schema
  /// version, and (kReadOnly) an empty one; kInvalidInput for another program's SQLite
  /// database. With kCreate an empty file becomes a new dataset.
  static Result<Dataset> open(const std::filesystem::path& path, Mode mode);

  Dataset(Dataset&& other) noexcept;
  Dataset& operator=(Dataset&& other) noexcept;
  Dataset(const Dataset&) = delete;
  Dataset& operator=(const Dataset&) = delete;
  ~Dataset();

  /// @brief The campaign for (spec, workload), created on first use; its total grows to
  /// `total_samples` when a rerun asks for more. Also stores the workload text (by hash) so
  /// that the dataset is self-contained for `corun fit`.
  Result<std::int64_t> ensure_campaign(const CampaignSpec& spec, const Workload& w,
                                       std::string_view workload_text, std::string_view device_name,
                                       std::uint64_t total_samples);

  /// @brief Sample indices already stored for a campaign, ascending.
  Result<std::vector<std::uint64_t>> stored_indices(std::int64_t campaign) const;

  /// @brief Stores one sample and its per-model rows atomically; a sample already present is
  /// left as it is.
  Status insert(std::int64_t campaign, const SampleRecord& record);

  /// @brief Every campaign with its provenance, by id.
  Result<std::vector<CampaignInfo>> campaigns() const;

  /// @brief The samples of a campaign, by index; model rows are placed at their workload
  /// index in Measurement::models (absent models have no row).
  Result<std::vector<SampleRecord>> samples(std::int64_t campaign) const;

  /// @brief The workload text stored under `hash`.
  Result<std::string> workload_text(std::string_view hash) const;

  /// @brief The file this dataset lives in.
  [[nodiscard]] const std::filesystem::path& path() const { return path_; }

 private:
  Dataset(sqlite3* db, std::filesystem::path path) : db_(db), path_(std::move(path)) {}
  Status exec(const char* sql) const;

  sqlite3* db_ = nullptr;
  std::filesystem::path path_;
};

}  // namespace corun::profile

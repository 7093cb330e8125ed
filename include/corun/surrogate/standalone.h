#pragma once

#include <array>
#include <cmath>
#include <nlohmann/json_fwd.hpp>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "corun/core/result.h"
#include "corun/profile/dataset.h"
#include "corun/spec/workload.h"
#include "corun/surrogate/targets.h"

namespace corun::surrogate {

/// @brief The error of a StandaloneProfile that was never measured (see unprofiled()).
inline constexpr std::string_view kNotProfiled = "not profiled standalone";

/// @brief One model measured alone in one local configuration: what MeanField features are
/// built from (its own metrics, and its contribution to the aggregate state of the others).
struct StandaloneProfile {
  std::string error;  ///< non-empty when the configuration could not run alone
  std::array<double, kTargetCount> target{NAN, NAN, NAN, NAN};  ///< metric_value per Target
  double sm_util = 0;      ///< GPU SM utilisation while it runs alone, 0..1
  double mem_bw_util = 0;  ///< DRAM bandwidth utilisation, 0..1
  double vram_gb = 0;      ///< device memory in use
  double power_w = 0;      ///< board power above idle (its dynamic power)
  /// Requests (frames) in the system alone, by Little's law (served rate x median latency),
  /// capped at 1: roughly the fraction of time it has work on the GPU. Co-runners pay launch
  /// and scheduling delays in proportion to how many of them are active.
  double occupancy = 0;
  std::size_t measurements = 1;  ///< repeats averaged into this profile (failed ones included)

  [[nodiscard]] bool ok() const { return error.empty(); }
};

/// @brief The standalone profile of every model in every local configuration: sum of the local
/// counts measurements, linear in N. Immutable after construction; thread-safe to share.
class StandaloneTable {
 public:
  StandaloneTable() = default;

  /// @brief Builds the table from a standalone campaign's samples. Every (model, local
  /// configuration) must be present; repeats are averaged (geometric means of metrics);
  /// configurations that failed in every repeat are kept with their reason.
  static Result<StandaloneTable> from_samples(const Workload& w,
                                              std::span<const profile::SampleRecord> samples);

  /// @brief This table with the (model, configuration) entries that `samples` cover replaced
  /// by their new measurements (e.g. a model re-profiled alone after its demand changed);
  /// entries without samples keep their profile.
  [[nodiscard]] Result<StandaloneTable> refreshed(
      const Workload& w, std::span<const profile::SampleRecord> samples) const;

  /// @brief A table for `w` in which nothing was profiled (every entry failed with "not
  /// profiled standalone"): what the joint surrogate, which never reads it, is given when a
  /// dataset holds no standalone campaign.
  static StandaloneTable unprofiled(const Workload& w);

  [[nodiscard]] std::size_t models() const { return profiles_.size(); }
  [[nodiscard]] std::size_t local_count(std::size_t m) const { return profiles_[m].size(); }
  [[nodiscard]] const StandaloneProfile& at(std::size_t m, std::size_t l) const {
    return profiles_[m][l];
  }
  /// @brief Number of standalone measurements behind the table.
  [[nodiscard]] std::size_t measurements() const;
  [[nodiscard]] double idle_power_w() const { return idle_power_w_; }
  [[nodiscard]] double tdp_w() const { return tdp_w_; }

  /// @brief The same table restricted to the first n models (workload prefixes).
  [[nodiscard]] StandaloneTable prefix(std::size_t n) const;

  [[nodiscard]] nlohmann::json to_json() const;
  static Result<StandaloneTable> from_json(const nlohmann::json& j);

 private:
  static Result<StandaloneTable> build(const Workload& w,
                                       std::span<const profile::SampleRecord> samples,
                                       const StandaloneTable* base);

  std::vector<std::vector<StandaloneProfile>> profiles_;
  double idle_power_w_ = 0;
  double tdp_w_ = 1;
};

}  // namespace corun::surrogate

#pragma once

#include <filesystem>
#include <future>
#include <memory>
#include <optional>
#include <vector>

#include "corun/catalog/catalog.h"
#include "corun/core/context.h"
#include "corun/core/result.h"
#include "corun/profile/dataset.h"
#include "corun/surrogate/surrogate.h"
#include "corun/surrogate/training.h"

namespace corun {

/// @brief Refits a surrogate in the background on its profiling campaigns plus what the online
/// loop measured, with the settings it was fitted with (kind, regressor, monotonicity, seed).
/// Online samples are kept only when measured at the demands the workload was profiled at: a
/// MeanField surrogate sees demand only through the standalone profiles it was fitted with.
/// Not thread-safe (one driver); the fit itself runs on its own thread.
class BackgroundRefit {
 public:
  /// @brief Reads the campaigns behind `fitted` from `dataset` once. Errors when the dataset
  /// holds none of its workload.
  static Result<std::unique_ptr<BackgroundRefit>> open(const std::filesystem::path& dataset,
                                                       const Catalog& catalog,
                                                       const surrogate::Surrogate& fitted);
  ~BackgroundRefit();

  /// @brief Records one online measurement of `config` on the workload as it was (`current`),
  /// measured with the noise of the `interval` stream.
  void add(const Workload& current, const JointConfig& config, const Measurement& m,
           const Context& interval);
  /// @brief Online samples recorded since the last refit started.
  [[nodiscard]] std::size_t pending() const { return online_.size() - used_; }
  /// @brief Online samples kept so far.
  [[nodiscard]] std::size_t online() const { return online_.size(); }
  /// @brief Starts a refit on everything recorded (no-op while one runs).
  void start();
  [[nodiscard]] bool running() const { return job_.valid(); }
  /// @brief Waits for the running refit and returns it; none when nothing runs.
  std::optional<Result<surrogate::Surrogate>> wait();

 private:
  BackgroundRefit() = default;
  surrogate::TrainingData data_;
  surrogate::FitOptions fit_;
  std::vector<profile::SampleRecord> online_;
  std::size_t used_ = 0;
  std::future<Result<surrogate::Surrogate>> job_;
};

}  // namespace corun

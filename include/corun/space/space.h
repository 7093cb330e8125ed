#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "corun/core/result.h"
#include "corun/spec/workload.h"

namespace corun {

/// @brief Local configuration index of each model; kAbsent marks a model that is not running.
using JointConfig = std::vector<std::int32_t>;
inline constexpr std::int32_t kAbsent = -1;

/// @brief Memory a model needs on the device in one local configuration (weights, activations,
/// KV cache for its concurrency and context, runtime context).
double model_vram_bytes(const ModelSpec& m, const Settings& s);

/// @brief The joint configuration space of a workload: sizes, decoding, feasibility.
class ConfigSpace {
 public:
  explicit ConfigSpace(const Workload& w);

  [[nodiscard]] std::size_t models() const { return radix_.size(); }
  [[nodiscard]] const std::vector<std::size_t>& local_counts() const { return radix_; }
  /// @brief Product of the local counts (saturates at UINT64_MAX).
  [[nodiscard]] std::uint64_t joint_count() const { return joint_count_; }
  /// @brief Decodes joint index `i` (mixed radix, last model fastest).
  [[nodiscard]] JointConfig decode(std::uint64_t i) const;
  void decode(std::uint64_t i, std::span<std::int32_t> out) const;
  [[nodiscard]] std::uint64_t encode(std::span<const std::int32_t> c) const;
  /// @brief Whether the joint configuration fits in device memory.
  [[nodiscard]] bool fits_vram(std::span<const std::int32_t> c) const;
  [[nodiscard]] double vram_bytes(std::span<const std::int32_t> c) const;
  /// @brief VRAM of model `m` in local config `l` (precomputed).
  [[nodiscard]] double local_vram_bytes(std::size_t m, std::size_t l) const {
    return local_vram_[m][l];
  }
  /// @brief Joint configurations that fit in VRAM (counted without enumerating when possible).
  [[nodiscard]] std::uint64_t feasible_count() const;

 private:
  std::vector<std::size_t> radix_;
  std::vector<std::vector<double>> local_vram_;
  std::uint64_t joint_count_ = 1;
  double capacity_bytes_ = 0;
};

}  // namespace corun

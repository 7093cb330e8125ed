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

/// @brief Fraction of a device's memory an LLM engine may take for weights, activations and its
/// KV cache: vLLM's default `--gpu-memory-utilization` (0.9).
inline constexpr double kLlmEngineMemoryFraction = 0.9;

/// @brief Memory a model needs on a device of `device_bytes` in one local configuration
/// (weights, activations, KV cache, runtime context).
///
/// An LLM's KV cache is sized for `request_concurrency` sequences at their full mean context
/// (prompt + output). When that is more than the engine may take of the device
/// (kLlmEngineMemoryFraction) but one such sequence fits, the engine takes that share and runs
/// KV-limited, as vLLM does with a `--max-num-seqs` beyond its cache: the sequences that do not
/// fit wait or are preempted (the sim measures the cost). Otherwise the full need is returned
/// and a device too small for it is out of memory. `device_bytes` = +infinity gives the full
/// need of every configuration.
double model_vram_bytes(const ModelSpec& m, const Settings& s, double device_bytes);

/// @brief The KV cache of an LLM in that configuration on a device of `device_bytes`, bytes:
/// the part of model_vram_bytes() left after weights, activations and the runtime context
/// (0 for a model without one).
double llm_kv_cache_bytes(const ModelSpec& m, const Settings& s, double device_bytes);

/// @brief Sequences that cache holds at once at their mean occupancy (the prompt and half the
/// output: a running sequence is on average half-way through its decode); +infinity for a
/// demand without token lengths, which holds nothing.
double llm_kv_sequences(const ModelSpec& m, const Settings& s, double device_bytes);

/// @brief A number of configurations. Exact while it fits in 64 bits; beyond 2^64 (or when only
/// a bound is known) it is a double, and exact() says so, so that a saturated or rounded
/// counter is never reported as a count.
class ConfigCount {
 public:
  /// @brief An exact count.
  static ConfigCount exactly(std::uint64_t n) {
    return ConfigCount(n, static_cast<double>(n), true);
  }
  /// @brief A count known only approximately (rounded, or a lower bound): `n` ≥ 0, may be +inf.
  static ConfigCount approximately(double n) { return ConfigCount(0, n, false); }
  /// @brief The product of `factors`: exact while every partial product fits in 64 bits (or
  /// when a factor is 0), else their product in double precision (+inf beyond about 1.8e308).
  static ConfigCount product(std::span<const std::size_t> factors);

  /// @brief Whether value() is the count itself.
  [[nodiscard]] bool exact() const { return exact_; }
  /// @brief The exact count. Requires exact().
  [[nodiscard]] std::uint64_t value() const;
  /// @brief The count as a double: exact below 2^53, rounded above, +inf beyond its range.
  [[nodiscard]] double approx() const { return approx_; }
  /// @brief "78732", or "about 1.646e+63" when not exact ("more than 1.8e+308" beyond a
  /// double's range).
  [[nodiscard]] std::string to_string() const;

 private:
  ConfigCount(std::uint64_t exact, double approx, bool is_exact)
      : exact_value_(exact), approx_(approx), exact_(is_exact) {}
  std::uint64_t exact_value_;
  double approx_;
  bool exact_;
};

/// @brief Number of joint configurations of `w`, the product of its models' local counts (not
/// exact beyond 2^64), without building its ConfigSpace.
ConfigCount joint_config_count(const Workload& w);

/// @brief The joint configuration space of a workload: sizes, decoding, feasibility.
class ConfigSpace {
 public:
  explicit ConfigSpace(const Workload& w);

  [[nodiscard]] std::size_t models() const { return radix_.size(); }
  [[nodiscard]] const std::vector<std::size_t>& local_counts() const { return radix_; }
  /// @brief Product of the local counts (not exact beyond 2^64).
  [[nodiscard]] const ConfigCount& joint_count() const { return joint_count_; }
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
  /// @brief Joint configurations that fit in VRAM: exact when every configuration fits or the
  /// space is small enough to enumerate; otherwise a lower bound (memory rounded up to MiB),
  /// marked not exact.
  [[nodiscard]] ConfigCount feasible_count() const;

 private:
  std::vector<std::size_t> radix_;
  std::vector<std::vector<double>> local_vram_;
  ConfigCount joint_count_ = ConfigCount::exactly(1);
  double capacity_bytes_ = 0;
};

}  // namespace corun

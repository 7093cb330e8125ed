#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace corun::serve {

/// @brief Lock-free counters behind `/metrics`: requests by route and status, the decision
/// latency histogram, telemetry samples and re-plans. Route labels are fixed at construction
/// (the service derives them from its route table), so that a client cannot grow the label
/// space. Rendering is serve/prometheus.h's. Thread-safety: every method may be called
/// concurrently.
class Metrics {
 public:
  /// Status codes counted individually; others fall into the last slot ("other").
  static constexpr std::array<int, 17> kCodes = {200, 201, 202, 400, 401, 404, 405, 408, 409,
                                                 413, 414, 415, 422, 431, 500, 503, 0};
  /// Upper bounds of the decision latency buckets, seconds (+Inf is implicit).
  static constexpr std::array<double, 12> kDecisionBuckets = {0.001, 0.005, 0.01, 0.025, 0.05, 0.1,
                                                              0.25,  0.5,   1,    2.5,   5,    10};

  /// @brief Counters for the given route labels (distinct, non-empty).
  explicit Metrics(std::vector<std::string> route_labels);

  /// @brief Counts one answered request of the route labelled `route` (a label not given at
  /// construction counts under the last label).
  void count_request(std::string_view route, int status);
  /// @brief Records one solver decision.
  void observe_decision(double seconds);
  /// @brief Counts accepted telemetry samples.
  void count_samples(std::uint64_t n) { samples_.fetch_add(n, std::memory_order_relaxed); }
  /// @brief Counts one re-plan that produced a plan.
  void count_replan() { replans_.fetch_add(1, std::memory_order_relaxed); }
  /// @brief Counts one run of the --on-plan hook, applied or not.
  void count_hook(bool applied) {
    (applied ? hooks_applied_ : hooks_failed_).fetch_add(1, std::memory_order_relaxed);
  }

  /// @brief The counters at one moment (each read is atomic; the set is not a transaction).
  struct Snapshot {
    std::vector<std::string> routes;
    std::vector<std::array<std::uint64_t, kCodes.size()>> requests;  ///< [route][code slot]
    std::array<std::uint64_t, kDecisionBuckets.size() + 1> buckets{};  ///< per bucket, not cumulative
    std::uint64_t decisions = 0;
    double decision_sum_s = 0;
    std::uint64_t samples = 0;
    std::uint64_t replans = 0;
    std::uint64_t hooks_applied = 0;
    std::uint64_t hooks_failed = 0;
  };
  [[nodiscard]] Snapshot snapshot() const;

 private:
  static std::size_t code_slot(int status);

  std::vector<std::string> routes_;
  std::vector<std::array<std::atomic<std::uint64_t>, kCodes.size()>> requests_;
  std::array<std::atomic<std::uint64_t>, kDecisionBuckets.size() + 1> buckets_{};
  std::atomic<std::uint64_t> decision_count_{0};
  std::atomic<std::uint64_t> decision_sum_us_{0};
  std::atomic<std::uint64_t> samples_{0};
  std::atomic<std::uint64_t> replans_{0};
  std::atomic<std::uint64_t> hooks_applied_{0};
  std::atomic<std::uint64_t> hooks_failed_{0};
};

}  // namespace corun::serve

#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>

namespace corun::serve {

/// @brief Lock-free counters behind `/metrics`: requests by route and status, and the
/// decision latency histogram. Per-model series (breaches, prediction error) are rendered by
/// the service from its monitor state. Thread-safety: every method may be called concurrently.
class Metrics {
 public:
  /// Route labels: a fixed set, so that a client cannot grow the label space.
  static constexpr std::array<std::string_view, 13> kRoutes = {
      "healthz", "metrics", "models", "model",  "demand",  "telemetry", "plan",
      "history", "replan",  "whatif", "openapi", "unknown", "transport"};
  static constexpr std::size_t kRouteCount = kRoutes.size();
  /// Status codes counted individually; others fall into the last slot ("other").
  static constexpr std::array<int, 14> kCodes = {200, 201, 202, 400, 401, 404, 405,
                                                 409, 413, 414, 415, 422, 500, 0};
  /// Upper bounds of the decision latency buckets, seconds (+Inf is implicit).
  static constexpr std::array<double, 12> kDecisionBuckets = {0.001, 0.005, 0.01, 0.025, 0.05, 0.1,
                                                              0.25,  0.5,   1,    2.5,   5,    10};

  /// @brief Counts one answered request.
  void count_request(std::size_t route, int status);
  /// @brief Records one solver decision.
  void observe_decision(double seconds);
  /// @brief Counts accepted telemetry samples.
  void count_samples(std::uint64_t n) { samples_.fetch_add(n, std::memory_order_relaxed); }
  /// @brief Counts one re-plan that produced a plan.
  void count_replan() { replans_.fetch_add(1, std::memory_order_relaxed); }

  /// @brief Appends the Prometheus text of these counters to `out`.
  void render(std::string& out) const;

 private:
  static std::size_t code_slot(int status);

  std::array<std::array<std::atomic<std::uint64_t>, kCodes.size()>, kRouteCount> requests_{};
  std::array<std::atomic<std::uint64_t>, kDecisionBuckets.size() + 1> buckets_{};
  std::atomic<std::uint64_t> decision_count_{0};
  std::atomic<std::uint64_t> decision_sum_us_{0};
  std::atomic<std::uint64_t> samples_{0};
  std::atomic<std::uint64_t> replans_{0};
};

}  // namespace corun::serve

#include "corun/serve/metrics.h"

namespace corun::serve {

Metrics::Metrics(std::vector<std::string> route_labels)
    : routes_(std::move(route_labels)), requests_(routes_.size()) {}

std::size_t Metrics::code_slot(int status) {
  for (std::size_t i = 0; i + 1 < kCodes.size(); ++i) {
    if (kCodes[i] == status) return i;
  }
  return kCodes.size() - 1;
}

void Metrics::count_request(std::string_view route, int status) {
  if (routes_.empty()) return;
  std::size_t r = 0;
  while (r + 1 < routes_.size() && routes_[r] != route) ++r;
  requests_[r][code_slot(status)].fetch_add(1, std::memory_order_relaxed);
}

void Metrics::observe_decision(double seconds) {
  std::size_t b = 0;
  while (b < kDecisionBuckets.size() && seconds > kDecisionBuckets[b]) ++b;
  buckets_[b].fetch_add(1, std::memory_order_relaxed);
  decision_count_.fetch_add(1, std::memory_order_relaxed);
  decision_sum_us_.fetch_add(static_cast<std::uint64_t>(seconds * 1e6), std::memory_order_relaxed);
}

Metrics::Snapshot Metrics::snapshot() const {
  Snapshot s;
  s.routes = routes_;
  s.requests.resize(routes_.size());
  for (std::size_t r = 0; r < routes_.size(); ++r) {
    for (std::size_t c = 0; c < kCodes.size(); ++c) {
      s.requests[r][c] = requests_[r][c].load(std::memory_order_relaxed);
    }
  }
  for (std::size_t b = 0; b < buckets_.size(); ++b) {
    s.buckets[b] = buckets_[b].load(std::memory_order_relaxed);
  }
  s.decisions = decision_count_.load(std::memory_order_relaxed);
  s.decision_sum_s = static_cast<double>(decision_sum_us_.load(std::memory_order_relaxed)) / 1e6;
  s.samples = samples_.load(std::memory_order_relaxed);
  s.replans = replans_.load(std::memory_order_relaxed);
  s.hooks_applied = hooks_applied_.load(std::memory_order_relaxed);
  s.hooks_failed = hooks_failed_.load(std::memory_order_relaxed);
  return s;
}

}  // namespace corun::serve

#include "corun/serve/metrics.h"

#include <cstdio>

namespace corun::serve {

std::size_t Metrics::code_slot(int status) {
  for (std::size_t i = 0; i + 1 < kCodes.size(); ++i) {
    if (kCodes[i] == status) return i;
  }
  return kCodes.size() - 1;
}

void Metrics::count_request(std::size_t route, int status) {
  if (route >= kRouteCount) route = kRouteCount - 1;
  requests_[route][code_slot(status)].fetch_add(1, std::memory_order_relaxed);
}

void Metrics::observe_decision(double seconds) {
  std::size_t b = 0;
  while (b < kDecisionBuckets.size() && seconds > kDecisionBuckets[b]) ++b;
  buckets_[b].fetch_add(1, std::memory_order_relaxed);
  decision_count_.fetch_add(1, std::memory_order_relaxed);
  decision_sum_us_.fetch_add(static_cast<std::uint64_t>(seconds * 1e6), std::memory_order_relaxed);
}

void Metrics::render(std::string& out) const {
  char line[256];
  out += "# HELP corun_serve_requests_total HTTP requests answered, by route and status.\n";
  out += "# TYPE corun_serve_requests_total counter\n";
  for (std::size_t r = 0; r < kRouteCount; ++r) {
    for (std::size_t c = 0; c < kCodes.size(); ++c) {
      const auto n = requests_[r][c].load(std::memory_order_relaxed);
      if (n == 0) continue;
      const std::string code = kCodes[c] == 0 ? "other" : std::to_string(kCodes[c]);
      std::snprintf(line, sizeof line,
                    "corun_serve_requests_total{route=\"%.*s\",code=\"%s\"} %llu\n",
                    static_cast<int>(kRoutes[r].size()), kRoutes[r].data(), code.c_str(),
                    static_cast<unsigned long long>(n));
      out += line;
    }
  }
  out += "# HELP corun_serve_decision_latency_seconds Wall time of one planning decision.\n";
  out += "# TYPE corun_serve_decision_latency_seconds histogram\n";
  std::uint64_t cumulative = 0;
  for (std::size_t b = 0; b <= kDecisionBuckets.size(); ++b) {
    cumulative += buckets_[b].load(std::memory_order_relaxed);
    if (b < kDecisionBuckets.size()) {
      std::snprintf(line, sizeof line,
                    "corun_serve_decision_latency_seconds_bucket{le=\"%g\"} %llu\n",
                    kDecisionBuckets[b], static_cast<unsigned long long>(cumulative));
    } else {
      std::snprintf(line, sizeof line,
                    "corun_serve_decision_latency_seconds_bucket{le=\"+Inf\"} %llu\n",
                    static_cast<unsigned long long>(cumulative));
    }
    out += line;
  }
  std::snprintf(line, sizeof line, "corun_serve_decision_latency_seconds_sum %.6f\n",
                static_cast<double>(decision_sum_us_.load(std::memory_order_relaxed)) / 1e6);
  out += line;
  std::snprintf(line, sizeof line, "corun_serve_decision_latency_seconds_count %llu\n",
                static_cast<unsigned long long>(decision_count_.load(std::memory_order_relaxed)));
  out += line;
  out += "# HELP corun_serve_telemetry_samples_total Telemetry samples accepted.\n";
  out += "# TYPE corun_serve_telemetry_samples_total counter\n";
  out += "corun_serve_telemetry_samples_total " + std::to_string(samples_.load()) + "\n";
  out += "# HELP corun_serve_replans_total Plans computed and stored.\n";
  out += "# TYPE corun_serve_replans_total counter\n";
  out += "corun_serve_replans_total " + std::to_string(replans_.load()) + "\n";
}

}  // namespace corun::serve

#include "queueing.h"

#include <algorithm>
#include <cmath>

namespace corun::sim {

namespace {

// Above this utilisation the steady-state formula is held constant and the finite-window
// backlog term takes over; 0.99 keeps Allen-Cunneen finite and continuous into overload.
constexpr double kMaxSteadyUtilisation = 0.99;

// Squared CV below which a queue counts as deterministic (D/D/c waits nothing).
constexpr double kMinVariability = 1e-9;

}  // namespace

double erlang_c(int servers, double offered_load) {
  if (servers < 1 || offered_load <= 0) return 0;
  const double c = servers;
  if (offered_load >= c) return 1;
  // Erlang B by its stable recursion B(k) = a B(k-1) / (k + a B(k-1)), then
  // C = c B / (c - a (1 - B)).
  double b = 1;
  for (int k = 1; k <= servers; ++k) b = offered_load * b / (k + offered_load * b);
  const double erlang_c = c * b / (c - offered_load * (1 - b));
  return std::clamp(erlang_c, 0.0, 1.0);
}

WaitTime ggc_wait(int servers, double arrival_rate, double service_s, double ca2, double cs2,
                  double window_s) {
  WaitTime w;
  if (servers < 1 || arrival_rate <= 0 || service_s <= 0) return w;
  const double c = servers;
  const double rho = arrival_rate * service_s / c;
  w.utilisation = rho;
  const double rho_steady = std::min(rho, kMaxSteadyUtilisation);
  const double wait_probability = erlang_c(servers, rho_steady * c);
  const double variability = 0.5 * (std::max(ca2, 0.0) + std::max(cs2, 0.0));
  if (variability > kMinVariability && wait_probability > 0) {
    // Conditional wait of M/M/c is exponential with rate c (1 - rho) / S; Allen-Cunneen
    // stretches it by the variability factor.
    const double rate = c * (1 - rho_steady) / (service_s * variability);
    const double cap = std::max(window_s, 0.0);
    const auto quantile = [&](double q) {
      return wait_probability > 1 - q ? std::log(wait_probability / (1 - q)) / rate : 0.0;
    };
    w.mean_s = std::min(wait_probability / rate, cap);
    w.p50_s = std::min(quantile(0.50), cap);
    w.p95_s = std::min(quantile(0.95), cap);
  }
  if (rho > 1) {
    const double span = (1 - 1 / rho) * std::max(window_s, 0.0);
    w.mean_s += 0.5 * span;
    w.p50_s += 0.5 * span;
    w.p95_s += 0.95 * span;
  }
  return w;
}

}  // namespace corun::sim

#pragma once

// Closed-form queueing used by the simulated testbed. Private to src/testbed; tested in
// tests/testbed/queueing_test.cc against hand computations.

namespace corun::sim {

/// @brief Erlang C: the probability that an arrival has to wait in an M/M/c queue.
/// @param servers c >= 1.
/// @param offered_load a = arrival rate x mean service time; must be < servers.
/// @return P(wait > 0) in [0, 1].
double erlang_c(int servers, double offered_load);

/// @brief Waiting time in queue (before service starts) of one job, in seconds.
struct WaitTime {
  double mean_s = 0;
  double p50_s = 0;
  double p95_s = 0;
  double utilisation = 0;  ///< rho = arrival rate x service / servers; may exceed 1
};

/// @brief Waiting time of a G/G/c queue observed over a finite window.
///
/// Below saturation: Allen-Cunneen, i.e. the M/M/c waiting time (Erlang C, exponential
/// conditional wait) scaled by (ca2 + cs2) / 2; utilisation is clamped at kMaxSteadyUtilisation
/// so that the value stays finite, and each quantile is capped at the window (a queue observed
/// for window_s seconds cannot show a longer steady-state wait).
/// At or above saturation (rho >= 1) a backlog grows through the window: a job that arrives at
/// t and completes inside the window waited (rho - 1) t, so waits are uniform on
/// [0, (1 - 1/rho) window]; that term is added. Never NaN or infinite for finite inputs.
/// @param servers c >= 1.
/// @param arrival_rate jobs per second (<= 0: no queue).
/// @param service_s mean service time of one job.
/// @param ca2 squared coefficient of variation of inter-arrival times.
/// @param cs2 squared coefficient of variation of service times.
/// @param window_s measurement window.
WaitTime ggc_wait(int servers, double arrival_rate, double service_s, double ca2, double cs2,
                  double window_s);

}  // namespace corun::sim

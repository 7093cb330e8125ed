#pragma once

// The parent <-> worker protocol: one JSON object per line on the worker's stdin and stdout.
// parent -> worker: a WorkerJob line, then one WorkerGo line per window. worker -> parent:
// {"ready":true} (or an error report) once the model is built and warm, then one
// WorkerReport line per window. A worker serves windows until its input closes, so that
// the parent can keep it for the next measurement of the same model and settings.
// Transitions: another WorkerJob line between windows reloads the model in the same process
// (the old one is freed first, then {"ready":true} again); a WorkerCut line during a window
// hands the arrivals from its time on to a new copy (a make-before-break swap).

#include <cstdint>
#include <string>
#include <vector>

#include "corun/catalog/model.h"
#include "corun/core/result.h"
#include "corun/spec/workload.h"

namespace corun::torchbed {

/// @brief What one worker runs: a (scaled) architecture, its settings and demand.
struct WorkerJob {
  ModelArch arch;
  Settings settings;
  Demand demand;
  bool int8 = false;
  int threads = 1;
  double window_s = 1;
  std::uint64_t seed = 1;
  std::string device = "cpu";
};

/// @brief The start of one window: its length and the seed of its arrival process.
struct WorkerGo {
  double window_s = 1;
  std::uint64_t seed = 1;
  /// The window's start on the host's monotonic clock (std::chrono::steady_clock, shared by
  /// every process), in ns; 0: when the worker reads this line. A copy that (re)started at
  /// the window's start reads it late, after its build and warm-up: what arrived meanwhile
  /// waited (or, frames, was lost).
  std::int64_t t0_ns = 0;
  /// Arrivals before this second of the window belong to another copy (the old one of a
  /// make-before-break swap): this copy serves from here.
  double from_s = 0;
  /// This copy was (re)started in this window: frames of a vision stream that arrived before
  /// it was ready are lost (a live stream does not wait); requests queue.
  bool restarted = false;
};

/// @brief A make-before-break hand-over during a window: the old copy serves no arrival from
/// `at_s` (seconds after the window's start) on, finishing the requests it has admitted.
struct WorkerCut {
  double at_s = 0;
};

/// @brief What a line from the parent is.
enum class ParentLine { kJob, kGo, kCut };
/// @brief Tells a job line from a start or a hand-over line (by its single top-level key).
ParentLine kind_of(const std::string& line);

/// @brief What one worker observed over its window.
struct WorkerReport {
  std::string error;  ///< non-empty: the worker could not run
  std::vector<double> latency_ms;  ///< per completed frame / request
  std::vector<double> ttft_ms;     ///< LLM, per completed prefill
  std::vector<double> tpot_ms;     ///< LLM, per completed request (its mean gap)
  double served = 0;       ///< frames, requests or output tokens completed in the window
  double dram_bytes = 0;   ///< estimated DRAM traffic of the work done (catalog cost model)
  /// When this copy could serve, in ms after the window's start (its build and warm-up end,
  /// for a copy that (re)started in the window; 0 for one ready before it).
  double ready_ms = 0;
  std::string torch_config;
};

std::string encode_job(const WorkerJob& job);
Result<WorkerJob> decode_job(const std::string& line);
std::string encode_go(const WorkerGo& go);
Result<WorkerGo> decode_go(const std::string& line);
std::string encode_cut(const WorkerCut& cut);
Result<WorkerCut> decode_cut(const std::string& line);
/// @brief What makes two jobs interchangeable for a running worker: everything but the
/// window and the seed (the weights keep the seed of the job that built the model; random
/// weights only set the values, not the work).
std::string worker_key(const WorkerJob& job);
std::string encode_report(const WorkerReport& r);
Result<WorkerReport> decode_report(const std::string& line);

}  // namespace corun::torchbed

#pragma once

// The parent <-> worker protocol: one JSON object per line on the worker's stdin and stdout.
// parent -> worker: a WorkerJob line, then one WorkerGo line per window. worker -> parent:
// {"ready":true} (or an error report) once the model is built and warm, then one
// WorkerReport line per window. A worker serves windows until its input closes, so that
// the parent can keep it for the next measurement of the same model and settings.

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
};

/// @brief What one worker observed over its window.
struct WorkerReport {
  std::string error;  ///< non-empty: the worker could not run
  std::vector<double> latency_ms;  ///< per completed frame / request
  std::vector<double> ttft_ms;     ///< LLM, per completed prefill
  std::vector<double> tpot_ms;     ///< LLM, per completed request (its mean gap)
  double served = 0;       ///< frames, requests or output tokens completed in the window
  double dram_bytes = 0;   ///< estimated DRAM traffic of the work done (catalog cost model)
  std::string torch_config;
};

std::string encode_job(const WorkerJob& job);
Result<WorkerJob> decode_job(const std::string& line);
std::string encode_go(const WorkerGo& go);
Result<WorkerGo> decode_go(const std::string& line);
/// @brief What makes two jobs interchangeable for a running worker: everything but the
/// window and the seed (the weights keep the seed of the job that built the model; random
/// weights only set the values, not the work).
std::string worker_key(const WorkerJob& job);
std::string encode_report(const WorkerReport& r);
Result<WorkerReport> decode_report(const std::string& line);

}  // namespace corun::torchbed

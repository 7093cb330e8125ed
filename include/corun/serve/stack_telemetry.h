#pragma once

#include <cstddef>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "corun/core/result.h"
#include "corun/runtime/unexplained_load.h"
#include "corun/serve/prometheus_client.h"
#include "corun/serve/telemetry.h"
#include "corun/spec/workload.h"

namespace corun::serve {

/// @brief What is wrong with a window of a model's stack telemetry (docs/stack.md, "Data
/// quality"). Each is a status in /v1/plan, a gauge in /metrics and a log line.
enum class DataQuality {
  kUnreachable,     ///< Prometheus did not answer
  kQueryError,      ///< Prometheus refused a query (a custom query's syntax, a bad label)
  kMissing,         ///< no series matches the model
  kAmbiguous,       ///< several serving instances (or series) match one model
  kNotFinite,       ///< a value is NaN or ±Inf (a quantile of a window without requests)
  kCounterReset,    ///< the request counter went back: the server restarted in the window
  kStale,           ///< the newest sample of the model's series is older than the window
  kTooFewRequests,  ///< too few requests completed for a p95
  kOutlier,         ///< a value far outside the model's recent noise, not yet confirmed
  kDemandMoved,     ///< the observed demand left the band around the registered one
};
inline constexpr std::size_t kDataQualityCount = 10;
/// @brief "unreachable", "query_error", "missing", "ambiguous", "not_finite", "counter_reset",
/// "stale", "too_few_requests", "outlier", "demand_moved".
std::string_view to_string(DataQuality q);

/// @brief One thing wrong with a window: what, of which metric ("" = the model), and the detail
/// a user acts on.
struct WindowIssue {
  DataQuality quality = DataQuality::kMissing;
  std::string metric;
  std::string detail;
};

/// @brief How a window is read (corun serve --prometheus, --window).
struct StackReadOptions {
  /// The window's length in seconds: rates and quantiles are over it (check = [1, 3600]).
  double window_s = 30;
  /// Completed requests below which a window's p95 is not learned (check = [0, 1e6]): a p95
  /// of fewer than 20 requests is their maximum, or an interpolation inside one bucket.
  double min_requests = 20;
  /// A model whose newest sample is older than this many seconds is stale (check = [0, 1e6]);
  /// 0: the window.
  double stale_after_s = 0;
};

/// @brief Checks every field of `o` against its declared range; the error names the field.
Status check(const StackReadOptions& o);

/// @brief One window of one model's stack telemetry.
struct WindowReading {
  /// The SLA metrics and throughput that read cleanly (model name set; plan id unset).
  TelemetrySample sample;
  /// Whether the controller may learn from `sample` (and count its breaches): false when
  /// Prometheus is unreachable, the model's series are missing, ambiguous or stale, its server
  /// restarted in the window, or too few requests completed.
  bool learnable = true;
  std::vector<WindowIssue> issues;
  std::optional<double> latency_ms_mean;  ///< Triton without p95 summaries: reported only
  std::optional<double> requests;         ///< completed in the window
  /// The demand observed (0: not observed): arrivals per second, mean tokens per request.
  double rps = 0, fps = 0, prompt_tokens = 0, output_tokens = 0;

  [[nodiscard]] bool has(DataQuality q) const;
};

/// @brief An instant query (PrometheusClient::query, or a test's fixture).
using PromQuery = std::function<PromResult(const std::string& promql)>;

/// @brief Reads one window of `m`'s metrics (serve/promql.h) through `query`. For a built-in
/// source it first checks the model's request counter: that it exists, that one serving
/// instance (`instance` label) exports it, that its newest sample is fresh, and that it was not
/// reset in the window. Never throws; what is wrong is in `issues`.
WindowReading read_window(const ModelSpec& m, const StackReadOptions& o, const PromQuery& query);

/// @brief dcgm-exporter's field of SM activity proper (the share of SMs with a warp resident,
/// averaged over the period); DCGM_FI_DEV_GPU_UTIL, the fallback, is the share of time any
/// kernel ran.
inline constexpr const char* kDcgmSmActive = "DCGM_FI_PROF_SM_ACTIVE";

/// @brief One window of the GPU's own metrics from dcgm-exporter (docs/stack.md, "GPU"): each
/// the window's mean. Absent where the exporter does not export it.
struct GpuReading {
  /// Share of the SMs busy, 0 to 1: DCGM_FI_PROF_SM_ACTIVE (a profiling field, off in
  /// dcgm-exporter's default set), else DCGM_FI_DEV_GPU_UTIL / 100 (`sm_active_field` says which).
  std::optional<double> sm_active;
  std::string sm_active_field;
  std::optional<double> dram_active;   ///< DCGM_FI_PROF_DRAM_ACTIVE, 0 to 1
  std::optional<double> fb_used_mib;   ///< DCGM_FI_DEV_FB_USED, MiB
  std::optional<double> power_w;       ///< DCGM_FI_DEV_POWER_USAGE, W
  std::optional<double> sm_clock_mhz;  ///< DCGM_FI_DEV_SM_CLOCK, MHz
  std::vector<WindowIssue> issues;
};


/// @brief Reads one window of the GPU that `labels` select (gpu, UUID, GPU_I_ID for a MIG
/// instance, Hostname) from dcgm-exporter's series through `query`: missing when no
/// DCGM_FI_DEV_FB_USED series matches, ambiguous when several GPUs do.
GpuReading read_gpu_window(const std::vector<std::pair<std::string, std::string>>& labels,
                           const StackReadOptions& o, const PromQuery& query);

/// @brief The outlier rule (docs/stack.md, "Outliers"): a window's SLA metric whose log lies
/// more than `mads` scaled median absolute deviations (and at least a factor `min_ratio`) from
/// the median of the model's last `history` accepted windows is held: neither learned nor
/// counted as a breach. The next window confirms it when it lies beyond the same bound on the
/// same side; then both count, so a real change costs one window of delay and a lone spike
/// costs nothing. Fewer than `min_history` accepted windows: everything is accepted.
struct OutlierOptions {
  std::size_t history = 20;     ///< check = [3, 1000]
  std::size_t min_history = 5;  ///< check = [2, history]
  double mads = 6;              ///< check = (0, 100]
  double min_ratio = 2;         ///< check = [1, 100]
};
Status check(const OutlierOptions& o);

/// @brief The outlier rule's state for one model. Thread-safety: none.
class OutlierGate {
 public:
  /// @brief Whether `value` of `metric` (> 0) is held as an outlier; when not, it joins the
  /// history. Non-positive or non-finite values are not judged (false).
  bool hold(const std::string& metric, double value, const OutlierOptions& o);

 private:
  struct Series {
    std::deque<double> logs;  ///< accepted windows, newest last
    int pending = 0;          ///< side of the held outlier (+1 above, -1 below, 0 none)
    double pending_log = 0;
  };
  std::map<std::string, Series, std::less<>> series_;
};

/// @brief Holds each SLA metric of `sample` that `gate` judges an outlier: the metric is removed
/// from the sample and an issue added. Returns the issues.
std::vector<WindowIssue> hold_outliers(TelemetrySample& sample, OutlierGate& gate,
                                       const OutlierOptions& o);

}  // namespace corun::serve

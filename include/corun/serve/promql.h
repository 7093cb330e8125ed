#pragma once

#include <string>
#include <utility>
#include <vector>

#include "corun/spec/workload.h"

namespace corun::serve {

/// @brief One PromQL query of a model's window: which stack metric it measures
/// (spec/telemetry_source.h, kStackMetrics) and the expression.
struct MetricQuery {
  std::string metric;
  std::string promql;
};

/// @brief A window as a PromQL duration: whole seconds ("30s"), at least 1 s.
std::string promql_duration(double window_s);

/// @brief Label matchers as PromQL writes them: `a="x",b="y"`, values escaped (`\`, `"`, newline)
/// as PromQL string literals are.
std::string promql_matchers(const std::vector<std::pair<std::string, std::string>>& labels);

/// @brief The queries that read one window of `m`'s metrics from its stack (docs/stack.md has
/// the table and the upstream documentation of every metric name):
///   vllm    p95 TTFT, TPOT and end-to-end latency from the `vllm:*_seconds` histograms
///           (histogram_quantile over the window's bucket rates, summed over the model's
///           engines); TPOT from `vllm:inter_token_latency_seconds` or, on older servers,
///           `vllm:time_per_output_token_seconds`, whichever exists; requests from
///           `vllm:request_success_total`; throughput (output tokens per second) from
///           `vllm:generation_tokens_total`; arrivals as completions plus the growth of
///           `vllm:num_requests_running` and `vllm:num_requests_waiting`; mean prompt and output
///           tokens per request from `vllm:prompt_tokens_total` and
///           `vllm:generation_tokens_total`.
///   triton  p95 latency from `nv_inference_request_summary_us{quantile="0.95"}` (present only
///           with --metrics-config summary_latencies=true), else the window's mean from
///           `nv_inference_request_duration_us` over `nv_inference_request_success` (marked as a
///           mean: never learned as a p95); throughput from `nv_inference_count` (batch items);
///           arrivals as that plus the growth of `nv_inference_pending_request_count`.
///   custom  the model's own `queries`, with `{window}` and `{labels}` filled in.
/// Latencies are in ms. None for a model without a source.
std::vector<MetricQuery> promql_queries(const ModelSpec& m, double window_s);

/// @brief The counter whose series identify where a built-in source's metrics come from:
/// `vllm:request_success_total` or `nv_inference_request_success` with the model's matchers
/// (one serving instance should match; a counter reset or a stale scrape shows on it). Empty for
/// a custom source.
std::string promql_request_counter(const ModelSpec& m);

}  // namespace corun::serve

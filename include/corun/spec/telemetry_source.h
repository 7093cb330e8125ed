#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace corun {

/// @brief Where a model's metrics are in Prometheus (`telemetry:` of a model entry;
/// docs/stack.md). `corun serve --prometheus URL` reads them each window: a `vllm` or `triton`
/// source from the serving stack's own metric names (serve/promql.h builds the queries), a
/// `custom` one from the PromQL written in `queries`.
struct TelemetrySource {
  enum class Kind {
    kNone,    ///< no source: telemetry only as POSTed
    kVllm,    ///< a vLLM server's `vllm:*` metrics
    kTriton,  ///< a Triton server's `nv_inference_*` metrics
    kCustom,  ///< PromQL per metric
  };
  Kind kind = Kind::kNone;
  /// Label matchers that select the model's series, in the order written (for vllm the default is
  /// {model_name: <name>}, for triton {model: <name>}).
  std::vector<std::pair<std::string, std::string>> labels;
  /// custom: (metric, PromQL) in the order written; `{window}` in a query stands for the window
  /// as a PromQL duration ("30s"), `{labels}` for the label matchers ("a=\"b\",c=\"d\"").
  std::vector<std::pair<std::string, std::string>> queries;

  [[nodiscard]] bool enabled() const { return kind != Kind::kNone; }
};

/// @brief "vllm", "triton", "custom" ("none" for kNone).
std::string_view to_string(TelemetrySource::Kind k);
/// @brief The kind named `name`, if any.
std::optional<TelemetrySource::Kind> telemetry_source_kind(std::string_view name);

/// @brief What one window of stack telemetry can say of a model, and the unit of each. A custom
/// source may give any of them; the built-in ones give what their stack exports.
struct StackMetric {
  std::string_view name;
  std::string_view meaning;
};
inline constexpr std::array<StackMetric, 10> kStackMetrics{{
    {"latency_ms_p95", "95th percentile of request latency, ms"},
    {"latency_ms_mean", "mean request latency, ms (reported, never learned as a p95)"},
    {"ttft_ms_p95", "95th percentile of time to first token, ms"},
    {"tpot_ms_p95", "95th percentile of time per output token, ms"},
    {"throughput", "requests (or frames) served per second"},
    {"requests", "requests completed in the window (a p95 needs enough of them)"},
    {"rps", "requests arriving per second (the demand)"},
    {"fps", "frames arriving per second (the demand)"},
    {"prompt_tokens", "mean prompt tokens per request"},
    {"output_tokens", "mean output tokens per request"},
}};

/// @brief Whether `name` is one of kStackMetrics.
bool is_stack_metric(std::string_view name);

/// @brief Whether `name` is a Prometheus label name ([a-zA-Z_][a-zA-Z0-9_]*, not starting with
/// "__", which Prometheus reserves).
bool is_prometheus_label_name(std::string_view name);

}  // namespace corun

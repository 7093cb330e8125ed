#pragma once

// The simulated GPU's LLM against public measurements: a table of points (GPU, model,
// precision, prompt, output, batch, metric, value, calibrate/validate split, reference;
// tests/data/llm-measurements.csv), the simulator's value for each, and the error per metric
// and split. `corun eval llm-physics` prints it; tests/testbed/llm_fidelity_test.cc holds it.
//
// @code
//   auto points = read_llm_measurements("tests/data/llm-measurements.csv");
//   auto rows = compare_llm_physics(*points, Catalog::default_catalog());
//   for (const auto& s : summarize(*rows)) std::printf("%s %.1f%%\n", s.metric.c_str(), ...);
// @endcode

#include <string>
#include <vector>

#include "corun/catalog/catalog.h"
#include "corun/core/result.h"

namespace corun {

/// @brief One published measurement.
struct LlmMeasurement {
  std::string gpu;        ///< catalog device
  std::string model;      ///< catalog model
  std::string precision;  ///< fp16, bf16, awq, ...
  int prompt = 1;         ///< prompt tokens
  int output = 1;         ///< output tokens
  int batch = 1;          ///< sequences decoding together
  std::string metric;     ///< ttft_ms, tpot_ms or ops_ms
  double value_ms = 0;
  bool calibrate = false;  ///< used to fit the simulator's parameters (else: validation only)
  std::string reference;
};

/// @brief Reads the table (CSV with a header; lines starting with '#' are comments).
Result<std::vector<LlmMeasurement>> read_llm_measurements(const std::string& path);

/// @brief One point beside the simulator's value.
struct LlmComparison {
  LlmMeasurement point;
  double sim_ms = 0;
  [[nodiscard]] double error() const { return sim_ms / point.value_ms - 1; }
};

/// @brief The simulator's value of every point: ttft_ms is measured on the simulated testbed
/// (one request in flight, the prompt in one chunk, no noise); tpot_ms is a decode step at
/// the batch the KV cache admits, at context prompt + output / 2; ops_ms is a step of
/// prompt x batch tokens without attention and the LM head. Errors name the point.
Result<std::vector<LlmComparison>> compare_llm_physics(const std::vector<LlmMeasurement>& points,
                                                       const Catalog& catalog);

/// @brief Median and worst |error| of one metric on one split.
struct LlmErrorSummary {
  std::string metric;
  bool calibrate = false;
  std::size_t points = 0;
  double median_abs = 0;
  double worst_abs = 0;
};

/// @brief Per metric (in order of first appearance) and split (calibrate first).
std::vector<LlmErrorSummary> summarize(const std::vector<LlmComparison>& rows);

}  // namespace corun

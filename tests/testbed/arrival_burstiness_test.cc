// Bursty LLM arrivals (Demand::arrival_cv) wait longer in the sim's queue: the G/G/c wait grows
// with (ca² + cs²) / 2 (Allen-Cunneen), where a written rate means Poisson arrivals (ca = 1).
#include <gtest/gtest.h>

#include "sim_test_util.h"

namespace corun::arrival_burstiness_test {
namespace {

using testing::make_spec;
using testing::make_workload;
using testing::measure_all;
using testing::settings;

// TTFT p95 of a lone small LLM on an L4 at a load that queues, arrivals of burstiness `cv`.
double ttft_p95(double cv, bool written = false) {
  Demand d;
  d.rps = 4;
  d.prompt_tokens = 512;
  d.output_tokens = 64;
  if (!written) d.arrival_cv = cv;
  const Workload w = make_workload(
      "l4", {make_spec("chat", "qwen2.5-0.5b", settings(Precision::kFp16, 1, 100, 2), d)});
  const Measurement m = measure_all(w, 3, 60);
  EXPECT_TRUE(m.models.at(0).ok()) << m.models.at(0).error;
  return m.models.at(0).ttft_ms_p95.value_or(0);
}

TEST(ArrivalBurstiness, BurstierRequestsWaitLongerAndAWrittenRateIsPoisson) {
  const double periodic = ttft_p95(0);
  const double poisson = ttft_p95(1);
  const double bursty = ttft_p95(3);
  EXPECT_LT(periodic, poisson);
  EXPECT_LT(poisson, bursty);
  EXPECT_EQ(ttft_p95(0, true), poisson);  // a demand that says nothing of burstiness: cv 1
}

}  // namespace
}  // namespace corun::arrival_burstiness_test

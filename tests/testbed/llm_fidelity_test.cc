// The simulated GPU's LLM against public measurements (tests/data/llm-measurements.csv: Vidur
// operator profiles, lmdeploy and TensorRT-LLM tables, each row citing its source). Golden
// values are the published numbers; only rows marked "calibrate" were used to fit
// src/testbed/sim_params.h. `corun eval llm-physics` prints the same comparison.

#include <gtest/gtest.h>

#include <cmath>

#include "corun/catalog/catalog.h"
#include "corun/testbed/llm_fidelity.h"

namespace corun::llm_fidelity_test {
namespace {

TEST(LlmFidelity, ValidationPointsAreWithinFifteenPercentMedianAndThirtyFiveWorst) {
  auto points = read_llm_measurements(CORUN_SOURCE_DIR "/tests/data/llm-measurements.csv");
  ASSERT_TRUE(points.ok()) << points.error().what();
  auto rows = compare_llm_physics(*points, Catalog::default_catalog());
  ASSERT_TRUE(rows.ok()) << rows.error().what();
  int validated = 0;
  for (const auto& s : summarize(*rows)) {
    if (s.calibrate) continue;
    SCOPED_TRACE(s.metric);
    validated += static_cast<int>(s.points);
    EXPECT_LE(s.median_abs, 0.15);
    EXPECT_LE(s.worst_abs, 0.35);
  }
  // The table keeps more validation than calibration points (TTFT, TPOT and operator rows).
  EXPECT_GE(validated, 25);
}

TEST(LlmFidelity, RejectsATableWithAnUnknownSplit) {
  const std::string path = ::testing::TempDir() + "/bad-llm.csv";
  FILE* f = std::fopen(path.c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fputs("gpu,model,precision,prompt,output,batch,metric,value_ms,split,reference\n"
             "a100-80gb,llama-2-7b,fp16,1,1,1,ttft_ms,10,both,x\n",
             f);
  std::fclose(f);
  auto points = read_llm_measurements(path);
  ASSERT_FALSE(points.ok());
  EXPECT_NE(std::string(points.error().what()).find("split"), std::string::npos);
}

}  // namespace
}  // namespace corun::llm_fidelity_test

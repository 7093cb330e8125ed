// Tool catalog parsing, the derived cost model, and the standalone classification.
#include "corun/mapping/tools.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

#include "corun/catalog/catalog.h"
#include "corun/mapping/profile.h"
#include "test_util.h"

namespace corun::mapping {
namespace {

const ToolCatalog& catalog() {
  static const ToolCatalog c = [] {
    auto r = default_tool_catalog();
    EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().what());
    return r.ok() ? std::move(r).value() : ToolCatalog{};
  }();
  return c;
}

const Device& rtx3090() {
  const Device* d = Catalog::default_catalog().find_device("rtx3090");
  EXPECT_NE(d, nullptr);
  return *d;
}

TEST(ToolCatalog, ListsTheNineteenToolsOfTheIssue) {
  EXPECT_EQ(catalog().tools.size(), 19u);
  for (const char* name :
       {"asr", "ocr", "text_embed", "rerank", "image_classify", "object_detect", "segment", "depth",
        "caption", "clip_image", "tts", "translate", "summarize", "sentiment", "ner", "face_detect",
        "pose", "vector_search", "generate"}) {
    EXPECT_NE(catalog().find(name), nullptr) << name;
  }
  int cpu_only = 0;
  for (const auto& t : catalog().tools) {
    cpu_only += t.has_gpu ? 0 : 1;
    EXPECT_FALSE(t.source.empty()) << t.name << " cites no source";
    EXPECT_GT(t.flops, 0) << t.name;
  }
  EXPECT_GE(cpu_only, 1) << "some tools must lack a GPU implementation";
}

TEST(ToolCatalog, ErrorsNameFileLineAndField) {
  const std::string text =
      "version: 1\n"
      "execution_model: {launch_overhead_us: 8, launch_delay_us: [1, 2], cpu_op_overhead_us: 2,\n"
      "  pcie_latency_us: 10, gpu_mem_efficiency: 0.8, cpu_mem_efficiency: 0.8,\n"
      "  interference_per_corunner: 0.06, noise: 0.03}\n"
      "tools:\n"
      "  good: {display_name: g, category: text, gflops: 1, dram_gb: 1, ops: 1, ctas: 1,\n"
      "         precision: fp16, gpu_efficiency: 0.5, cpu_efficiency: 0.5, cpu_threads: 1,\n"
      "         weights_mb: 1, working_mb: 1, input_mb: 1, output_mb: 1, source: s}\n"
      "  bad:\n"
      "    display_name: b\n"
      "    category: text\n"
      "    gflop: 1\n"
      "    precision: fp17\n"
      "    source: s\n";
  auto r = parse_tool_catalog(text, "tools.yaml");
  ASSERT_FALSE(r.ok());
  const std::string msg = r.error().what();
  EXPECT_NE(msg.find("tools.yaml:12:5: tools.bad.gflop: unknown field 'gflop' (did you mean "
                     "'gflops'?)"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("tools.bad.precision: unknown precision 'fp17'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("tools.bad.gflops: missing required field"), std::string::npos) << msg;
}

TEST(ToolCost, MatchesAHandComputation) {
  // conv on the round device (see test_util.h): upload 100 MB / 10 GB/s = 10 ms; kernels
  // max(1e12 / (100e12 x 0.5 x fill 1), 1e9 / 1e12) = 20 ms; launches 100 x 10 us = 1 ms;
  // download 10 MB / 10 GB/s = 1 ms. CPU: 1e12 / (10 x 100e9 x 0.5) = 2 s.
  const ToolCost c =
      derive_cost(testing::conv_tool(), testing::round_device(), testing::round_model());
  EXPECT_NEAR(c.h2d_s, 0.010, 1e-12);
  EXPECT_NEAR(c.kernel_s, 0.020, 1e-12);
  EXPECT_NEAR(c.launch_s, 0.001, 1e-12);
  EXPECT_NEAR(c.d2h_s, 0.001, 1e-12);
  EXPECT_NEAR(c.gpu_s(), 0.032, 1e-12);
  EXPECT_NEAR(c.cpu_s, 2.0, 1e-12);
  EXPECT_NEAR(c.sm_demand, 20.0 / 21.0, 1e-12);  // all SMs busy 20 of its 21 ms
  EXPECT_NEAR(c.bw_demand, 1.0 / 21.0, 1e-12);   // 1 ms of DRAM time in 21 ms
  EXPECT_DOUBLE_EQ(c.vram_bytes, 2e9);
  // "small" fills 10 of 100 SMs: 1e10 / (100e12 x 0.5 x 0.1) = 2 ms.
  const ToolCost s =
      derive_cost(testing::small_tool(), testing::round_device(), testing::round_model());
  EXPECT_NEAR(s.kernel_s, 0.002, 1e-12);
  EXPECT_NEAR(s.cpu_s, 0.1, 1e-12);  // 1e10 / (2 cores x 100e9 x 0.5)
}

TEST(ToolProfile, MixResemblesThePaperOnTheDefaultDevice) {
  // The paper profiled 19 tools: 11 GPU-preferred, 1 CPU-preferred (PCIe), 3 device-neutral,
  // 4 ambiguous.
  const auto profiles = profile_tools(catalog(), rtx3090());
  std::map<Preference, int> mix;
  bool pcie_bound_cpu_tool = false;
  for (const auto& p : profiles) {
    ++mix[p.preference];
    if (p.preference == Preference::kCpu && p.transfer_dominated) pcie_bound_cpu_tool = true;
  }
  EXPECT_EQ(mix[Preference::kGpu], 11);
  EXPECT_EQ(mix[Preference::kCpu], 1);
  EXPECT_EQ(mix[Preference::kNeutral], 3);
  EXPECT_EQ(mix[Preference::kAmbiguous], 4);
  EXPECT_TRUE(pcie_bound_cpu_tool) << "one tool must be CPU-preferred because of PCIe";
}

TEST(ToolProfile, MagnitudesAreThoseUsersReport) {
  std::map<std::string, ToolProfile> by;
  for (auto& p : profile_tools(catalog(), rtx3090())) by[p.tool] = p;
  // YOLO11m at 640 px on a desktop Ampere GPU: single-digit milliseconds (Ultralytics
  // benchmarks list a few ms with TensorRT, ~5-10 ms eager); on a 16-core CPU a few hundred.
  EXPECT_GT(*by["object_detect"].gpu_ms, 2);
  EXPECT_LT(*by["object_detect"].gpu_ms, 20);
  EXPECT_GT(by["object_detect"].cpu_ms, 80);
  EXPECT_LT(by["object_detect"].cpu_ms, 600);
  // Whisper-small on 30 s of audio: well under a second on a GPU, about a second on a CPU.
  EXPECT_LT(*by["asr"].gpu_ms, 1000);
  EXPECT_GT(by["asr"].cpu_ms, 300);
  EXPECT_LT(by["asr"].cpu_ms, 5000);
  // Stable Diffusion 1.5, 20 steps at 512 px: about half a second to a second on an RTX 3090.
  EXPECT_GT(*by["generate"].gpu_ms, 300);
  EXPECT_LT(*by["generate"].gpu_ms, 3000);
  // Shipping a 1 GB index over 25 GB/s takes 40 ms: more than the CPU needs to search it.
  EXPECT_GT(by["vector_search"].gpu_transfer_ms, 39);
  EXPECT_EQ(by["vector_search"].preference, Preference::kCpu);
}

TEST(ToolProfile, ThresholdsAreDocumentedOnes) {
  const ProfileThresholds th;
  EXPECT_EQ(classify_speedup(2.0, th), Preference::kGpu);
  EXPECT_EQ(classify_speedup(1.99, th), Preference::kAmbiguous);
  EXPECT_EQ(classify_speedup(1.25, th), Preference::kNeutral);
  EXPECT_EQ(classify_speedup(0.8, th), Preference::kNeutral);
  EXPECT_EQ(classify_speedup(0.79, th), Preference::kAmbiguous);
  EXPECT_EQ(classify_speedup(0.5, th), Preference::kCpu);
}

TEST(ExecModel, LaunchDelayExtrapolatesLinearly) {
  ExecModel m = testing::round_model();
  m.launch_delay_us = {1.4, 1.7, 6.8, 11.9, 17.0};
  EXPECT_NEAR(m.launch_delay_s(0), 1.4e-6, 1e-15);
  EXPECT_NEAR(m.launch_delay_s(4), 17.0e-6, 1e-15);
  EXPECT_NEAR(m.launch_delay_s(6), (17.0 + 2 * 5.1) * 1e-6, 1e-12);
}

}  // namespace
}  // namespace corun::mapping

// The tool-DAG scenario format: the shipped scenarios load, and bad files get errors that name
// the file, the line and the field.
#include "corun/mapping/scenario.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "corun/catalog/catalog.h"
#include "corun/mapping/problem.h"

namespace corun::mapping::scenario_test {
namespace {

const ToolCatalog& catalog() {
  static const ToolCatalog c = std::move(default_tool_catalog()).value();
  return c;
}

std::string error_of(const std::string& text) {
  auto r = parse_scenario(text, "bad.yaml", catalog());
  EXPECT_FALSE(r.ok()) << text;
  return r.ok() ? "" : r.error().what();
}

constexpr const char* kHeader = "name: t\nkind: contention\nvram_budget_gb: 8\n";

TEST(Scenario, ShippedScenariosLoadAndCoverTheThreeKinds) {
  auto all = load_scenario_dir(std::string(CORUN_SOURCE_DIR) + "/workloads/tools", catalog());
  ASSERT_TRUE(all.ok()) << all.error().what();
  ASSERT_EQ(all->size(), 13u);
  int serial = 0, contention = 0, memory = 0;
  for (const auto& s : *all) {
    serial += s.kind == "serial";
    contention += s.kind == "contention";
    memory += s.kind == "memory";
    auto p = PlacementProblem::build(s, catalog(), Catalog::default_catalog());
    ASSERT_TRUE(p.ok()) << p.error().what();
    if (s.kind == "memory") {
      // "Memory-constrained": the budget is below the summed footprints of the GPU tools.
      double sum = 0;
      for (std::size_t i = 0; i < p->size(); ++i) {
        if (p->tool(i).has_gpu) sum += p->tool(i).vram_bytes() / 1e9;
      }
      EXPECT_LT(s.vram_budget_gb, sum) << s.name;
    }
  }
  EXPECT_EQ(serial, 4);
  EXPECT_EQ(contention, 5);
  EXPECT_EQ(memory, 4);
}

TEST(Scenario, ParsesEdgesDeclaredInAnyOrder) {
  auto s = parse_scenario(std::string(kHeader) +
                              "tools:\n"
                              "  - {id: b, tool: caption, after: [a]}\n"
                              "  - {id: a, tool: object_detect}\n",
                          "ok.yaml", catalog());
  ASSERT_TRUE(s.ok()) << s.error().what();
  EXPECT_EQ(s->nodes[0].after, std::vector<std::size_t>{1});
  EXPECT_EQ(s->noise, catalog().model.default_noise);
  EXPECT_EQ(s->device, "rtx3090");
}

TEST(Scenario, ErrorsNameFileLineFieldAndSuggest) {
  EXPECT_NE(error_of(std::string(kHeader) + "tools:\n  - {id: a, tool: ocrr}\n")
                .find("bad.yaml:5:19: tools[0].tool: unknown tool 'ocrr' (did you mean 'ocr'?)"),
            std::string::npos);
  EXPECT_NE(error_of(std::string(kHeader) + "tools:\n  - {id: a, tool: ocr, after: [b]}\n")
                .find("tools[0].after[0]: unknown tool id 'b'"),
            std::string::npos);
  EXPECT_NE(error_of(std::string(kHeader) + "tools:\n  - {id: a, tool: ocr, after: [b]}\n"
                                            "  - {id: b, tool: ocr, after: [a]}\n")
                .find("cycle"),
            std::string::npos);
  EXPECT_NE(error_of(std::string(kHeader) + "tools:\n  - {id: a, tool: ocr}\n"
                                            "  - {id: a, tool: asr}\n")
                .find("duplicate id 'a'"),
            std::string::npos);
  EXPECT_NE(error_of(std::string(kHeader) + "vram_budget: 3\ntools:\n  - {id: a, tool: ocr}\n")
                .find("unknown field 'vram_budget' (did you mean 'vram_budget_gb'?)"),
            std::string::npos);
  EXPECT_NE(error_of("name: t\nkind: contention\ntools:\n  - {id: a, tool: ocr}\n")
                .find("vram_budget_gb: missing required field"),
            std::string::npos);
  EXPECT_NE(error_of("name: t\nkind: parallel\nvram_budget_gb: 1\ntools: []\n")
                .find("unknown kind 'parallel'"),
            std::string::npos);
  EXPECT_NE(error_of("name: [oops\n").find("invalid YAML"), std::string::npos);
}

TEST(Scenario, UnknownDeviceIsAnErrorOfTheDeviceField) {
  auto s =
      parse_scenario(std::string(kHeader) + "device: rtx9090\ntools:\n  - {id: a, tool: ocr}\n",
                     "dev.yaml", catalog());
  ASSERT_TRUE(s.ok());
  auto p = PlacementProblem::build(*s, catalog(), Catalog::default_catalog());
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.error().what().find("dev.yaml: device: unknown device 'rtx9090'"), std::string::npos);
}

TEST(Scenario, WrittenYamlReadsBack) {
  auto s =
      parse_scenario(std::string(kHeader) +
                         "description: 'says \"hi\" with a \\ in it'\n"
                         "background: {gpu_sm_util: 0.25}\n"
                         "tools:\n  - {id: a, tool: ocr}\n  - {id: b, tool: tts, after: [a]}\n",
                     "in.yaml", catalog());
  ASSERT_TRUE(s.ok()) << s.error().what();
  auto back = parse_scenario(to_yaml(*s), "out.yaml", catalog());
  ASSERT_TRUE(back.ok()) << back.error().what() << "\n" << to_yaml(*s);
  EXPECT_EQ(back->description, s->description);
  EXPECT_EQ(back->background.gpu_sm_util, 0.25);
  EXPECT_EQ(back->nodes[1].after, std::vector<std::size_t>{0});
}

TEST(Scenario, MissingDirectoryAndFileAreErrors) {
  EXPECT_FALSE(load_scenario_dir("/nonexistent/dir", catalog()).ok());
  EXPECT_FALSE(load_scenario("/nonexistent/file.yaml", catalog()).ok());
}

}  // namespace
}  // namespace corun::mapping::scenario_test

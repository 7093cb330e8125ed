#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "corun/core/atomic_file.h"
#include "corun/core/rng.h"
#include "corun/core/strings.h"
#include "corun/core/yaml.h"
#include "temp_dir.h"

namespace corun::strings_test {
namespace {

TEST(Strings, EditDistanceMatchesHandCounts) {
  EXPECT_EQ(edit_distance("kitten", "sitting"), 3u);  // the textbook example
  EXPECT_EQ(edit_distance("", "abc"), 3u);
  EXPECT_EQ(edit_distance("imgsize", "imgsz"), 2u);
}

TEST(Strings, NearestSuggestsOnlyPlausibleMisspellings) {
  const std::vector<std::string> known = {"models", "device", "objective"};
  EXPECT_EQ(nearest("modles", known), "models");
  EXPECT_EQ(nearest("zzzzzzzz", known), "");
  EXPECT_EQ(did_you_mean("devise", known), " (did you mean 'device'?)");
}

TEST(Strings, NearestMatchesFamilyAndSize) {
  // The device and model keys of catalog/*.yaml.
  const std::vector<std::string> devices = {"rtx3090",   "v100", "a100-80gb",      "l4", "h100-sxm",
                                            "h100-pcie", "h200", "jetson-agx-orin"};
  const std::vector<std::string> models = {
      "yolo11n",    "yolo11s",    "yolo11m",       "yolo11l",      "yolo11x",
      "resnet50",   "bert-base",  "whisper-small", "qwen2.5-0.5b", "qwen2.5-1.5b",
      "qwen2.5-3b", "qwen2.5-7b", "llama-2-7b",    "llama-3-8b",   "mistral-7b"};
  // A family token beats a near spelling of another product line.
  EXPECT_EQ(nearest("a100", devices), "a100-80gb");  // not v100, one edit away
  EXPECT_EQ(did_you_mean("h100", devices), " (did you mean 'h100-sxm'?)");  // not h200
  EXPECT_EQ(nearest("A100_80GB", devices), "a100-80gb");
  EXPECT_EQ(nearest("h100-pcie-80gb", devices), "h100-pcie");  // shares its variant token
  // A published model name: case, separators and the fine-tune suffix set aside.
  EXPECT_EQ(nearest("Qwen2.5-7B-Instruct", models), "qwen2.5-7b");
  EXPECT_EQ(nearest("Qwen2.5-0.5B-Instruct", models), "qwen2.5-0.5b");
  EXPECT_EQ(nearest("qwen2.5_3b_chat", models), "qwen2.5-3b");
  EXPECT_EQ(nearest("Llama-2-7b-chat-hf", models), "llama-2-7b");
  // The size decides within a family: 1.5b shares the query's size token, 0.5b does not.
  EXPECT_EQ(nearest("qwen2.5-1.5b-awq", models), "qwen2.5-1.5b");
  // A name of a product line the catalog lacks is no family match: only a near spelling.
  EXPECT_EQ(nearest("yolo11q", models), "yolo11n");
  EXPECT_EQ(nearest("b200", devices), "h200");
  EXPECT_EQ(nearest("mi300x", devices), "");
  // A first token without a digit is a common word, not a family: field names keep the edit
  // distance rule ("max_batch" is not a kind of "max_channels").
  const std::vector<std::string> fields = {"max_channels", "batch", "vram_gb"};
  EXPECT_EQ(nearest("max_batch", fields), "");
  EXPECT_EQ(nearest("vram_gib", fields), "vram_gb");
}

TEST(Strings, SplitKeepsEmptyFields) {
  EXPECT_EQ(split("a,,b", ','), (std::vector<std::string>{"a", "", "b"}));
  EXPECT_EQ(format_number(640), "640");
  EXPECT_EQ(format_number(0.33), "0.33");
}

TEST(Rng, SameSeedSameStreamDifferentSeedDifferentStream) {
  Rng a(42), b(42), c(43);
  for (int i = 0; i < 100; ++i) {
    const auto x = a();
    EXPECT_EQ(x, b());
  }
  EXPECT_NE(Rng(42)(), c());
  EXPECT_NE(derive_seed(1, {2, 3}), derive_seed(1, {3, 2}));
}

TEST(Rng, UniformAndNormalHaveTheRightMoments) {
  Rng r(7);
  double sum = 0, sq = 0;
  const int n = 200000;
  for (int i = 0; i < n; ++i) {
    const double z = r.normal();
    sum += z;
    sq += z * z;
  }
  EXPECT_NEAR(sum / n, 0.0, 0.01);
  EXPECT_NEAR(sq / n, 1.0, 0.02);
}

TEST(AtomicFile, WritesWholeFileAndLeavesNoTemporary) {
  const testing::TempDir scratch("corun-atomic-test");
  const std::filesystem::path& dir = scratch.path();
  const auto path = dir / "out.json";
  ASSERT_TRUE(write_file_atomic(path, "first").ok());
  ASSERT_TRUE(write_file_atomic(path, "second").ok());
  auto text = read_file(path);
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(*text, "second");
  std::size_t files = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir)) ++files;
  EXPECT_EQ(files, 1u);
  EXPECT_FALSE(write_file_atomic(dir / "missing" / "x", "y").ok());
  EXPECT_FALSE(read_file(dir / "nope").ok());
  std::filesystem::remove_all(dir);
}

TEST(Yaml, SyntaxErrorsCarryLineAndFile) {
  auto n = parse_yaml("a: 1\nb: [\n", "f.yaml");
  ASSERT_FALSE(n.ok());
  EXPECT_NE(n.error().what().find("f.yaml:3"), std::string::npos) << n.error().what();
}

TEST(Yaml, TypedReadsReportPathAndRange) {
  auto n = parse_yaml("a: {b: 5, c: x, d: 1.5}\n", "f.yaml");
  ASSERT_TRUE(n.ok());
  Diagnostics d;
  YamlField top(*n, "f.yaml", "", &d);
  EXPECT_EQ(top["a"]["b"].number(0, 10), 5.0);
  EXPECT_FALSE(top["a"]["b"].number(0, 4).has_value());
  EXPECT_FALSE(top["a"]["c"].number(0, 4).has_value());
  EXPECT_FALSE(top["a"]["d"].integer(0, 4).has_value());
  EXPECT_FALSE(top["a"].integer_at("zz", 0, 1, true).has_value());
  ASSERT_EQ(d.items().size(), 4u);
  EXPECT_EQ(d.items()[0].path, "a.b");
  EXPECT_EQ(d.items()[0].line, 1);
  EXPECT_NE(d.items()[1].reason.find("expected a number"), std::string::npos);
  EXPECT_NE(d.items()[2].reason.find("whole number"), std::string::npos);
  EXPECT_EQ(d.items()[3].path, "a.zz");
}

TEST(Strings, MarkupEscapeReplacesTheFourSpecialCharacters) {
  EXPECT_EQ(markup_escape(R"(a<b> & "c" 'd')"), "a&lt;b&gt; &amp; &quot;c&quot; 'd'");
  EXPECT_EQ(markup_escape("&amp;"), "&amp;amp;");  // already escaped text is escaped again
  EXPECT_EQ(markup_escape(""), "");
}

}  // namespace
}  // namespace corun::strings_test

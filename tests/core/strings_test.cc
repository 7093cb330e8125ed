#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "corun/core/atomic_file.h"
#include "corun/core/rng.h"
#include "corun/core/strings.h"
#include "corun/core/yaml.h"

namespace corun {
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
  const auto dir = std::filesystem::temp_directory_path() / "corun_atomic_test";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
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
}  // namespace corun

// The SVG line plot: deterministic, escaped, gaps at NaN, log axes with 1-2-5 ticks.
#include "corun/core/svg.h"

#include <gtest/gtest.h>

#include <cmath>

namespace corun::svg_test {
namespace {

std::size_t count(const std::string& s, const std::string& what) {
  std::size_t n = 0;
  for (auto p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

TEST(Svg, RendersSeriesLegendAndEscapedText) {
  SvgPlot p;
  p.title = "R<2> & co";
  p.x_label = "budget";
  p.y_label = "R^2";
  p.series.push_back({"a \"quoted\" line", {1, 2, 3}, {0.5, 0.7, 0.9}, false, ""});
  p.series.push_back({"dashed", {1, 2, 3}, {0.6, NAN, 0.8}, true, ""});
  const std::string svg = p.render();
  EXPECT_EQ(svg.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\"", 0), 0u);
  EXPECT_EQ(svg.substr(svg.size() - 7), "</svg>\n");
  EXPECT_NE(svg.find("R&lt;2&gt; &amp; co"), std::string::npos);
  EXPECT_NE(svg.find("a &quot;quoted&quot; line"), std::string::npos);
  EXPECT_EQ(svg.find("R<2>"), std::string::npos);
  // The NaN splits the second series into two pieces: two move-to commands in its path.
  const auto dashed = svg.find("stroke-dasharray=\"6,4\"/>");
  ASSERT_NE(dashed, std::string::npos);
  const auto path_start = svg.rfind("<path d=\"", dashed);
  const std::string path = svg.substr(path_start, dashed - path_start);
  EXPECT_EQ(count(path, "M"), 2u) << path;
  // Five points are drawn (the NaN is not).
  EXPECT_EQ(count(svg, "<circle"), 5u);
  EXPECT_EQ(svg, p.render());
}

TEST(Svg, LogAxisTicksAreOneTwoFive) {
  SvgPlot p;
  p.log_x = true;
  p.series.push_back({"s", {10, 40, 100}, {1, 2, 3}, false, ""});
  const std::string svg = p.render();
  for (const char* t : {">10<", ">20<", ">50<", ">100<"}) {
    EXPECT_NE(svg.find(t), std::string::npos) << t;
  }
}

TEST(Svg, EmptyPlotStillRenders) {
  SvgPlot p;
  p.title = "nothing";
  const std::string svg = p.render();
  EXPECT_NE(svg.find("nothing"), std::string::npos);
  EXPECT_EQ(count(svg, "<circle"), 0u);
}

TEST(Svg, ASeriesMayNameItsColour) {
  SvgPlot p;
  p.series.push_back({"measured", {0, 1}, {1, 2}, false, "#d62728"});
  p.series.push_back({"predicted", {0, 1}, {2, 1}, true, ""});
  const std::string svg = p.render();
  EXPECT_NE(svg.find("stroke=\"#d62728\""), std::string::npos);
  EXPECT_NE(svg.find("stroke=\"#E69F00\""), std::string::npos);  // the palette's second
}

TEST(Svg, MarkerLabelsThatWouldOverlapGoOnSeparateRows) {
  SvgPlot p;
  p.series.push_back({"s", {0, 100}, {1, 2}, false, ""});
  p.markers_x = {{50, "arrive cam3"}, {50, "demand chat"}, {90, "depart cam1"}};
  const std::string svg = p.render();
  // Default layout: top 36, first label row at 48, rows 11 apart; the third marker is far
  // enough right to go back to the first row.
  const auto y_of = [&](const std::string& label) {
    const auto end = svg.find(">" + label + "<");
    const auto y = svg.rfind(" y=\"", end);
    return svg.substr(y + 4, svg.find('"', y + 4) - y - 4);
  };
  EXPECT_EQ(y_of("arrive cam3"), "48.0");
  EXPECT_EQ(y_of("demand chat"), "59.0");
  EXPECT_EQ(y_of("depart cam1"), "48.0");
}

}  // namespace
}  // namespace corun::svg_test

#include "fulcrum/report/svg_chart.hpp"

#include "fulcrum/core/error.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace fulcrum {
namespace {

using Ticks = std::vector<double>;

std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + what.size())) ++n;
  return n;
}

BarChart sample_chart() {
  return {"Attention time per rank",
          "time (ms)",
          {"rank 0", "rank 1", "rank 2", "rank 3"},
          {{"distca", {7.3, 7.1, 7.2, 7.0}}, {"packed", {3, 12.5, 0, 1}}, {"perdoc-cp", {6, 6, 6, 6}}}};
}

TEST(NiceTicks, StepsAreOneTwoOrFiveTimesAPowerOfTen) {
  EXPECT_EQ(nice_ticks(7.3), (Ticks{0, 2, 4, 6, 8}));
  EXPECT_EQ(nice_ticks(10), (Ticks{0, 2, 4, 6, 8, 10}));
  EXPECT_EQ(nice_ticks(12.5), (Ticks{0, 5, 10, 15}));
  EXPECT_EQ(nice_ticks(4.2), (Ticks{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(nice_ticks(1), (Ticks{0, 0.2, 0.4, 0.6, 0.8, 1}));
  EXPECT_EQ(nice_ticks(0.23), (Ticks{0, 0.05, 0.1, 0.15, 0.2, 0.25}));
  EXPECT_EQ(nice_ticks(0.3), (Ticks{0, 0.1, 0.2, 0.3}));
  EXPECT_EQ(nice_ticks(3.4e9), (Ticks{0, 1e9, 2e9, 3e9, 4e9}));
  EXPECT_EQ(nice_ticks(45, 2), (Ticks{0, 50}));
  EXPECT_EQ(nice_ticks(0), (Ticks{0, 1}));
}

TEST(NiceTicks, CoverTheMaximumWithFewIntervalsAcrossMagnitudes) {
  for (double max : {1e-310, 3e-7, 0.0999, 1.0001, 99.0, 123456.0, 9.9e300}) {
    const auto ticks = nice_ticks(max);
    ASSERT_GE(ticks.size(), 2u) << max;
    EXPECT_EQ(ticks.front(), 0.0);
    EXPECT_GE(ticks.back(), max);
    EXPECT_LT(ticks[ticks.size() - 2], max) << max;
    EXPECT_LE(ticks.size(), 11u) << max;
  }
  EXPECT_THROW(nice_ticks(-1), Error);
  EXPECT_THROW(nice_ticks(std::numeric_limits<double>::infinity()), Error);
}

TEST(BarChartSvg, IsOneDocumentWithABarPerValue) {
  const std::string svg = bar_chart_svg(sample_chart());
  EXPECT_EQ(svg.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\"", 0), 0u);
  EXPECT_TRUE(svg.ends_with("</svg>"));
  EXPECT_EQ(count(svg, "<svg"), 1u);
  EXPECT_EQ(count(svg, "<rect class=\"bar\""), 12u);
  EXPECT_EQ(count(svg, "<title>"), 12u);
  EXPECT_EQ(count(svg, "<rect class=\"legend-swatch\""), 3u);
  EXPECT_EQ(count(svg, "<text class=\"category\""), 4u);
  // 12.5 is the maximum, so the axis is 0, 5, 10, 15.
  EXPECT_EQ(count(svg, "<text class=\"tick\""), 4u);
  EXPECT_NE(svg.find(">15</text>"), std::string::npos);
  EXPECT_NE(svg.find("<title>packed, rank 1: 12.5</title>"), std::string::npos);
  EXPECT_NE(svg.find(">Attention time per rank</text>"), std::string::npos);
  EXPECT_NE(svg.find(">time (ms)</text>"), std::string::npos);
  // Each series has its own colour.
  EXPECT_EQ(count(svg, "fill=\"#0072B2\""), 5u);
  EXPECT_EQ(count(svg, "fill=\"#E69F00\""), 5u);
  EXPECT_EQ(count(svg, "fill=\"#009E73\""), 5u);
  // Every opened element is closed: tags balance.
  EXPECT_EQ(count(svg, "<text"), count(svg, "</text>"));
  EXPECT_EQ(count(svg, "<title>"), count(svg, "</title>"));
  EXPECT_EQ(count(svg, "<rect class=\"bar\""), count(svg, "</rect>"));
}

TEST(BarChartSvg, TallestBarSpansItsShareOfTheAxis) {
  BarChart chart{"", "", {"a"}, {{"s", {8}}}};
  // 8 is a tick, so the bar reaches the top of the plot: 280 px tall from y = 20 (no title).
  EXPECT_NE(bar_chart_svg(chart).find("x=\"108.0\" y=\"20.0\" width=\"288.0\" height=\"280.0\""), std::string::npos)
      << bar_chart_svg(chart);
}

TEST(BarChartSvg, EscapesText) {
  BarChart chart{"A & B <fast>", "\"y\"", {"x<1", "R&D"}, {{"it's", {1, 2}}}};
  const std::string svg = bar_chart_svg(chart);
  EXPECT_NE(svg.find("A &amp; B &lt;fast&gt;"), std::string::npos);
  EXPECT_NE(svg.find("&quot;y&quot;"), std::string::npos);
  EXPECT_NE(svg.find(">x&lt;1</text>"), std::string::npos);
  EXPECT_NE(svg.find("<title>it&apos;s, R&amp;D: 2</title>"), std::string::npos);
  EXPECT_EQ(svg.find("R&D"), std::string::npos);
  EXPECT_EQ(svg.find("x<1"), std::string::npos);
  EXPECT_EQ(xml_escape(std::string("a\x01\tb")), "a?\tb");
}

TEST(BarChartSvg, ThinsCategoryLabelsThatWouldOverlap) {
  BarChart chart{"", "", {}, {{"s", {}}}};
  for (int r = 0; r < 256; ++r) {
    chart.categories.push_back("rank " + std::to_string(r));
    chart.series[0].values.push_back(r);
  }
  const std::string svg = bar_chart_svg(chart);
  EXPECT_EQ(count(svg, "<rect class=\"bar\""), 256u);
  EXPECT_LT(count(svg, "<text class=\"category\""), 256u / 8);
  EXPECT_GE(count(svg, "<text class=\"category\""), 2u);
}

std::string error_of(const BarChart& chart) {
  try {
    bar_chart_svg(chart);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kBadInput);
    return e.what();
  }
  return "no error";
}

TEST(BarChartSvg, RejectsBadInputNamingTheField) {
  BarChart chart = sample_chart();
  chart.series[1].values.pop_back();
  EXPECT_EQ(error_of(chart), "series[1].values: 3 values for 4 categories");
  chart = sample_chart();
  chart.series[2].values[3] = -1;
  EXPECT_EQ(error_of(chart), "series[2].values[3] = -1: must be finite and >= 0");
  chart = sample_chart();
  chart.series[0].values[0] = std::nan("");
  EXPECT_EQ(error_of(chart).rfind("series[0].values[0] = nan", 0), 0u);
  chart = sample_chart();
  chart.categories.clear();
  EXPECT_EQ(error_of(chart).rfind("categories:", 0), 0u);
  chart = sample_chart();
  chart.series.clear();
  EXPECT_EQ(error_of(chart).rfind("series:", 0), 0u);
  chart = sample_chart();
  chart.series.resize(9, chart.series[0]);
  EXPECT_EQ(error_of(chart).rfind("series: 9 series, at most 8", 0), 0u);
}

}  // namespace
}  // namespace fulcrum

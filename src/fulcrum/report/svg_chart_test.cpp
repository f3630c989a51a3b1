#include "fulcrum/report/svg_chart.hpp"

#include "fulcrum/core/error.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

namespace fulcrum {
namespace {

using Ticks = std::vector<double>;

std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + what.size())) ++n;
  return n;
}

// Four ranks, three planners, plain bars.
BarChart plain_chart() {
  BarChart chart{"Attention time per rank", "time (ms)", "rank", {"distca", "packed", "perdoc-cp"}, {"time"}, {}};
  const double values[3][4] = {{7.3, 7.1, 7.2, 7.0}, {3, 12.5, 0, 1}, {6, 6, 6, 6}};
  chart.panels.push_back({"", {}});
  for (int r = 0; r < 4; ++r) {
    BarGroup group{std::to_string(r), {}};
    for (const auto& planner : values) group.bars.push_back({planner[r]});
    chart.panels[0].groups.push_back(group);
  }
  return chart;
}

// `points` sweep points in `panels` panels, `planners` stacked bars of three parts each.
BarChart stacked_chart(std::size_t panels, std::size_t points, std::size_t planners, const std::string& label_stem) {
  BarChart chart{"Where an average GPU's iteration goes (simulated, h200-dgx)",
                 "time per iteration (s)",
                 "",
                 {},
                 {"linear", "attention", "exposed comm"},
                 {}};
  for (std::size_t s = 0; s < planners; ++s) chart.bar_names.push_back("planner-" + std::to_string(s) + "/pingpong");
  for (std::size_t p = 0; p < panels; ++p) {
    chart.panels.push_back({"gpus=" + std::to_string(64 << p), {}});
    for (std::size_t g = 0; g < points; ++g) {
      BarGroup group{label_stem + std::to_string(131072ULL * (g + 1)) + " dataset=prolong", {}};
      for (std::size_t s = 0; s < planners; ++s) {
        group.bars.push_back({1.0 + static_cast<double>(s), 0.5 * static_cast<double>(g), 0.25});
      }
      chart.panels[p].groups.push_back(group);
    }
  }
  return chart;
}

// What the render test checks on the real glyphs, here on the writer's own estimate: every label inside
// the canvas, no two overlapping, one label per group.
void expect_clean_layout(const BarChart& chart) {
  const RenderedChart out = render_bar_chart(chart);
  std::size_t groups = 0;
  for (const auto& panel : chart.panels) groups += panel.groups.size();
  std::size_t group_labels = 0;
  for (std::size_t i = 0; i < out.labels.size(); ++i) {
    const auto& a = out.labels[i];
    group_labels += a.css_class == "group" ? 1 : 0;
    EXPECT_GE(a.box.x0, 0) << a.text;
    EXPECT_GE(a.box.y0, 0) << a.text;
    EXPECT_LE(a.box.x1, out.width) << a.text;
    EXPECT_LE(a.box.y1, out.height) << a.text;
    for (std::size_t j = i + 1; j < out.labels.size(); ++j) {
      EXPECT_FALSE(a.box.overlaps(out.labels[j].box))
          << a.css_class << " '" << a.text << "' and " << out.labels[j].css_class << " '" << out.labels[j].text << "'";
    }
  }
  EXPECT_EQ(group_labels, groups);
  EXPECT_EQ(count(out.svg, "<text"), out.labels.size());
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

TEST(BarChartSvg, PlainBarsAreOneDocumentWithABarPerValue) {
  const std::string svg = bar_chart_svg(plain_chart());
  EXPECT_EQ(svg.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\"", 0), 0u);
  EXPECT_TRUE(svg.ends_with("</svg>"));
  EXPECT_EQ(count(svg, "<svg"), 1u);
  EXPECT_EQ(count(svg, "<rect class=\"bar\""), 12u);
  EXPECT_EQ(count(svg, "<title>"), 12u);
  EXPECT_EQ(count(svg, "<rect class=\"legend-swatch\""), 3u);
  EXPECT_EQ(count(svg, "<text class=\"group\""), 4u);
  EXPECT_EQ(count(svg, "<text class=\"bar-label\""), 0u);  // the legend names plain bars
  // 12.5 is the maximum, so the axis is 0, 5, 10, 15.
  EXPECT_EQ(count(svg, "<text class=\"tick\""), 4u);
  EXPECT_NE(svg.find(">15</text>"), std::string::npos);
  EXPECT_NE(svg.find("data-group=\"1\""), std::string::npos);
  EXPECT_NE(svg.find("<title>packed, 1: 12.5</title>"), std::string::npos);
  EXPECT_NE(svg.find(">Attention time per rank</text>"), std::string::npos);
  EXPECT_NE(svg.find(">time (ms)</text>"), std::string::npos);
  EXPECT_NE(svg.find(">rank</text>"), std::string::npos);
  // Each bar name has its own colour: four bars and a swatch.
  EXPECT_EQ(count(svg, "fill=\"#0072B2\""), 5u);
  EXPECT_EQ(count(svg, "fill=\"#E69F00\""), 5u);
  EXPECT_EQ(count(svg, "fill=\"#009E73\""), 5u);
  EXPECT_EQ(count(svg, "<text"), count(svg, "</text>"));
  EXPECT_EQ(count(svg, "<title>"), count(svg, "</title>"));
  EXPECT_EQ(count(svg, "<rect class=\"bar\""), count(svg, "</rect>"));
}

TEST(BarChartSvg, TallestBarSpansThePlot) {
  // 8 is a tick, so the bar reaches the top of the 260 px plot.
  const BarChart chart{"", "", "", {"s"}, {"v"}, {{"", {{"a", {{8}}}}}}};
  const std::string svg = bar_chart_svg(chart);
  EXPECT_NE(svg.find("height=\"260.0\" fill=\"#0072B2\""), std::string::npos) << svg;
}

TEST(BarChartSvg, StackedBarsStackTheirSegmentsAndAreLabelled) {
  const BarChart chart = stacked_chart(1, 2, 2, "max-doc-len=");
  const std::string svg = bar_chart_svg(chart);
  EXPECT_EQ(count(svg, "<rect class=\"bar\""), 12u);  // 2 points x 2 planners x 3 parts
  EXPECT_EQ(count(svg, "<text class=\"bar-label\""), 4u);
  EXPECT_EQ(count(svg, "<rect class=\"legend-swatch\""), 3u);
  EXPECT_NE(svg.find("<title>exposed comm, planner-1/pingpong, max-doc-len=262144 dataset=prolong: 0.25</title>"),
            std::string::npos);
  // Colours follow the parts: per part one swatch and one segment per bar.
  EXPECT_EQ(count(svg, "fill=\"#009E73\""), 5u);
  // The tallest stack (2 + 0.5 + 0.25 = 2.75) sets the scale: 0, 0.5, ..., 3.
  EXPECT_NE(svg.find(">3</text>"), std::string::npos);
  EXPECT_EQ(svg.find(">3.5</text>"), std::string::npos);
  // One stacked bar per group is labelled too: the colours name the parts, not the bar.
  EXPECT_EQ(count(bar_chart_svg(stacked_chart(1, 3, 1, "p")), "<text class=\"bar-label\""), 3u);
  // The legend's top entry is the top segment.
  EXPECT_LT(svg.find(">exposed comm</text>"), svg.find(">linear</text>"));
}

TEST(BarChartSvg, SegmentsOfABarTouch) {
  const BarChart chart{"", "", "", {"a", "b"}, {"low", "high"}, {{"", {{"g", {{1, 3}, {2, 2}}}}}}};
  const std::string svg = bar_chart_svg(chart);
  // Scale 0..4 over 260 px: 65 px per unit. Bar a: 1 unit from the base, 3 on top of it.
  const double base = 12 + 7.5 + 260;  // pad, half a tick label, plot
  EXPECT_NE(svg.find(fmt::format("y=\"{:.1f}\" width", base - 65)), std::string::npos) << svg;
  EXPECT_NE(svg.find(fmt::format("y=\"{:.1f}\" width", base - 260)), std::string::npos) << svg;
  EXPECT_NE(svg.find("height=\"65.0\""), std::string::npos);
  EXPECT_NE(svg.find("height=\"195.0\""), std::string::npos);
}

TEST(BarChartSvg, LabelsTurnFromOneLineToWrappedToVerticalAsGroupsMultiply) {
  auto chart_of = [](std::size_t groups, const std::string& stem) {
    BarChart chart{"", "y", "", {"a", "b"}, {"v"}, {{"", {}}}};
    for (std::size_t g = 0; g < groups; ++g) chart.panels[0].groups.push_back({stem + std::to_string(g), {{1}, {2}}});
    return chart;
  };
  const std::string few = bar_chart_svg(chart_of(3, "max-doc-len=131072 dataset="));
  EXPECT_EQ(count(few, "<tspan"), 0u);
  EXPECT_EQ(count(few, "rotate("), 1u);  // the y label only
  const std::string more = bar_chart_svg(chart_of(6, "max-doc-len=131072 dataset="));
  EXPECT_EQ(count(more, "<tspan"), 12u);  // two lines each
  EXPECT_EQ(count(more, "rotate("), 1u);
  const std::string many = bar_chart_svg(chart_of(40, "max-doc-len=131072 dataset="));
  EXPECT_EQ(count(many, "<text class=\"group\" transform=\"rotate(-90"), 40u);
  for (std::size_t n : {3u, 6u, 7u, 40u, 300u}) expect_clean_layout(chart_of(n, "max-doc-len=131072 dataset="));
}

TEST(BarChartSvg, EveryLayoutKeepsLabelsInsideAndApart) {
  expect_clean_layout(plain_chart());
  BarChart ranks = plain_chart();
  ranks.panels[0].groups.clear();
  for (int r = 0; r < 256; ++r) ranks.panels[0].groups.push_back({std::to_string(r), {{1.0 * r}, {2}, {3}}});
  expect_clean_layout(ranks);
  const RenderedChart wide = render_bar_chart(ranks);
  EXPECT_LE(wide.width, 1400);                                 // continued in rows rather than one 256-group strip
  EXPECT_GT(count(wide.svg, "<line class=\"axis\""), 2u * 4);  // in at least four rows
  EXPECT_EQ(wide.svg.find("(cont.)"), std::string::npos);      // untitled panels continue untitled
  const std::string continued = bar_chart_svg(stacked_chart(1, 60, 4, "max-doc-len="));
  EXPECT_NE(continued.find(">gpus=64 (cont.)</text>"), std::string::npos);
  for (std::size_t panels : {1u, 3u, 7u}) {
    for (std::size_t points : {1u, 2u, 6u, 18u}) {
      for (std::size_t planners : {1u, 2u, 4u}) {
        expect_clean_layout(stacked_chart(panels, points, planners, "max-doc-len="));
        BarChart speedup = stacked_chart(panels, points, planners, "tolerance=0.0");
        speedup.segment_names = {"speedup"};
        for (auto& panel : speedup.panels) {
          for (auto& group : panel.groups) {
            for (auto& bar : group.bars) bar = {bar[0]};
          }
        }
        expect_clean_layout(speedup);
      }
    }
  }
  // A title wider than the chart widens the canvas instead of leaving it.
  BarChart titled = plain_chart();
  titled.title = std::string(200, 'W');
  titled.y_label = std::string(120, 'M');
  expect_clean_layout(titled);
}

TEST(BarChartSvg, EscapesText) {
  const BarChart chart{"A & B <fast>", "\"y\"", "", {"it's"}, {"v"}, {{"", {{"x<1", {{1}}}, {"R&D", {{2}}}}}}};
  const std::string svg = bar_chart_svg(chart);
  EXPECT_NE(svg.find("A &amp; B &lt;fast&gt;"), std::string::npos);
  EXPECT_NE(svg.find("&quot;y&quot;"), std::string::npos);
  EXPECT_NE(svg.find(">x&lt;1</text>"), std::string::npos);
  EXPECT_NE(svg.find("data-group=\"R&amp;D\""), std::string::npos);
  EXPECT_NE(svg.find("<title>it&apos;s, R&amp;D: 2</title>"), std::string::npos);
  EXPECT_EQ(svg.find("R&D"), std::string::npos);
  EXPECT_EQ(svg.find("x<1"), std::string::npos);
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
  BarChart chart = plain_chart();
  chart.panels[0].groups[1].bars.pop_back();
  EXPECT_EQ(error_of(chart), "panels[0].groups[1].bars: 2 bars for 3 bar names");
  chart = plain_chart();
  chart.panels[0].groups[3].bars[2] = {-1};
  EXPECT_EQ(error_of(chart), "panels[0].groups[3].bars[2][0] = -1: must be finite and >= 0");
  chart = plain_chart();
  chart.panels[0].groups[0].bars[0] = {std::nan("")};
  EXPECT_EQ(error_of(chart).rfind("panels[0].groups[0].bars[0][0] = nan", 0), 0u);
  chart = plain_chart();
  chart.panels[0].groups[2].bars[1] = {1, 2};
  EXPECT_EQ(error_of(chart), "panels[0].groups[2].bars[1]: 2 values for 1 segment names");
  chart = plain_chart();
  chart.panels[0].groups[2].label = "  ";
  EXPECT_EQ(error_of(chart), "panels[0].groups[2].label: empty, every group needs a label");
  chart = plain_chart();
  chart.panels[0].groups.clear();
  EXPECT_EQ(error_of(chart).rfind("panels[0].groups:", 0), 0u);
  chart = plain_chart();
  chart.panels.clear();
  EXPECT_EQ(error_of(chart).rfind("panels:", 0), 0u);
  chart = plain_chart();
  chart.bar_names.clear();
  EXPECT_EQ(error_of(chart).rfind("bar_names:", 0), 0u);
  chart = plain_chart();
  chart.segment_names.clear();
  EXPECT_EQ(error_of(chart).rfind("segment_names:", 0), 0u);
  chart = plain_chart();
  chart.bar_names.resize(9, "x");
  EXPECT_EQ(error_of(chart).rfind("bar_names: 9 names, at most 8", 0), 0u);
  chart = stacked_chart(1, 1, 1, "p");
  chart.segment_names.resize(9, "x");
  EXPECT_EQ(error_of(chart).rfind("segment_names: 9 names, at most 8", 0), 0u);
}

}  // namespace
}  // namespace fulcrum

// Bar charts as standalone SVG (what `--svg PATH` writes): no plotting library, so the CLI stays
// dependency-free and the output opens in any browser. One mechanism draws every chart: groups of bars,
// each bar a stack of one or more segments, in one or more panels (small multiples) on one value scale.
// Margins are sized from the labels' estimated extents (svg_text.hpp), so every group is labelled and no
// label is clipped or overlaps another; the layout reports those boxes for tests.
#pragma once

#include "fulcrum/report/svg_text.hpp"

#include <string>
#include <vector>

namespace fulcrum {

struct BarGroup {
  std::string label;                      // under the group; wrapped at spaces, or vertical, to fit
  std::vector<std::vector<double>> bars;  // [bar][segment], finite and >= 0
};

struct BarPanel {
  std::string title;  // above the panel, e.g. "gpus=64"; may be empty
  std::vector<BarGroup> groups;
};

struct BarChart {
  std::string title;
  std::string y_label;                     // the quantity and its unit, e.g. "attention CPU time (ms)"
  std::string x_label;                     // what the groups are, e.g. "rank"; may be empty
  std::vector<std::string> bar_names;      // the bars of every group, in order
  std::vector<std::string> segment_names;  // the stacked parts of every bar, bottom up; one: plain bars
  std::vector<BarPanel> panels;            // small multiples, all on the same value scale

  /// Colours: one per bar name for plain bars (the legend names the bars), one per segment for stacked
  /// bars (the legend names the segments and a label under each bar names it).
  [[nodiscard]] bool stacked() const { return segment_names.size() > 1; }

  /// Throws a bad-input Error naming the field: no panels, groups, bar or segment names; more colours
  /// than the palette has; a group whose bar or segment count differs from the names'; a negative or
  /// non-finite value.
  void validate() const;
};

/// A text element of a rendered chart and the box it occupies (estimated, conservatively).
struct ChartLabel {
  std::string css_class;  // title, y-label, x-label, panel-title, tick, group, bar-label, legend
  std::string text;       // its lines joined by spaces
  TextBox box;
};

struct RenderedChart {
  std::string svg;  // one document: starts with "<svg", ends with "</svg>"
  double width = 0, height = 0;
  std::vector<ChartLabel> labels;
};

/// Lays out and draws the chart: a y axis with ticks at nice round values in every panel, a label under
/// every group (one line, wrapped at spaces, or vertical, whichever first lets the widest panel fit;
/// past that the panel continues in further rows), a label under every bar of stacked charts, a legend,
/// one <rect class="bar" data-group="GROUP LABEL"> per bar segment with its value as a <title> tooltip,
/// colours from a colour-blind-safe palette, all text XML-escaped.
RenderedChart render_bar_chart(const BarChart& chart);

/// render_bar_chart(chart).svg.
std::string bar_chart_svg(const BarChart& chart);

/// Axis ticks from 0 to the first multiple of a "nice" step (1, 2 or 5 times a power of ten) that
/// reaches max_value, with at most about `target_intervals` intervals: 7.3 -> 0, 2, 4, 6, 8.
/// max_value must be finite and >= 0; 0 gives 0, 1.
std::vector<double> nice_ticks(double max_value, int target_intervals = 5);

}  // namespace fulcrum

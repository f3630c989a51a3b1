// Grouped bar charts as standalone SVG (what `--svg PATH` writes): no plotting library, so the CLI
// stays dependency-free and the output opens in any browser.
#pragma once

#include <string>
#include <vector>

namespace fulcrum {

struct BarSeries {
  std::string name;            // legend entry, e.g. a planner
  std::vector<double> values;  // one per category, finite and >= 0
};

struct BarChart {
  std::string title;
  std::string y_label;
  std::vector<std::string> categories;  // x groups, e.g. ranks
  std::vector<BarSeries> series;        // one bar per category each, e.g. one per planner

  /// Throws a bad-input Error naming the field: no categories or series, more series than palette
  /// colours, a value count that differs from the category count, a negative or non-finite value.
  void validate() const;
};

/// The chart as an SVG document (starts with "<svg", ends with "</svg>"): y axis with ticks at nice
/// round values, category labels, a legend, one <rect class="bar"> per value with the value as its
/// <title> tooltip, colours from a colour-blind-safe palette, all text XML-escaped.
std::string bar_chart_svg(const BarChart& chart);

/// Axis ticks from 0 to the first multiple of a "nice" step (1, 2 or 5 times a power of ten) that
/// reaches max_value, with at most about `target_intervals` intervals: 7.3 -> 0, 2, 4, 6, 8.
/// max_value must be finite and >= 0; 0 gives 0, 1.
std::vector<double> nice_ticks(double max_value, int target_intervals = 5);

/// Escapes &, <, >, " and ' for XML text and attribute values.
std::string xml_escape(const std::string& text);

}  // namespace fulcrum

#include "fulcrum/report/svg_chart.hpp"

#include "fulcrum/core/error.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>

namespace fulcrum {
namespace {

// Okabe & Ito's palette, distinguishable under the common colour-vision deficiencies; yellow and black
// go last since yellow is faint on white and black reads as an axis.
constexpr std::array<const char*, 8> kPalette = {"#0072B2", "#E69F00", "#009E73", "#D55E00",
                                                 "#CC79A7", "#56B4E9", "#F0E442", "#000000"};

// Layout in pixels. Text widths are estimated (no font metrics without a renderer) at kCharWidth per
// character of 12 px sans-serif, which errs wide for most labels.
constexpr double kLeft = 72;  // tick labels and the rotated y label
constexpr double kPlotHeight = 280;
constexpr double kBottom = 36;  // category labels
constexpr double kMinPlotWidth = 360;
constexpr double kMaxPlotWidth = 960;  // past this bars get thinner rather than the chart wider
constexpr double kPreferredBarWidth = 14;
constexpr double kGroupGapFraction = 0.2;
constexpr double kLegendGap = 24;
constexpr double kLegendRow = 20;
constexpr double kCharWidth = 7;

std::string num(double value) { return fmt::format("{:.1f}", value); }

std::size_t longest(const std::vector<std::string>& texts) {
  std::size_t n = 0;
  for (const auto& t : texts) n = std::max(n, t.size());
  return n;
}

}  // namespace

void BarChart::validate() const {
  if (categories.empty()) fail("categories: none given, need at least one");
  if (series.empty()) fail("series: none given, need at least one");
  if (series.size() > kPalette.size()) {
    fail("series: {} series, at most {} (one distinct palette colour each)", series.size(), kPalette.size());
  }
  for (std::size_t s = 0; s < series.size(); ++s) {
    const auto& values = series[s].values;
    if (values.size() != categories.size()) {
      fail("series[{}].values: {} values for {} categories", s, values.size(), categories.size());
    }
    for (std::size_t c = 0; c < values.size(); ++c) {
      if (!std::isfinite(values[c]) || values[c] < 0) {
        fail("series[{}].values[{}] = {}: must be finite and >= 0", s, c, values[c]);
      }
    }
  }
}

std::vector<double> nice_ticks(double max_value, int target_intervals) {
  if (!std::isfinite(max_value) || max_value < 0) fail("max_value = {}: must be finite and >= 0", max_value);
  if (target_intervals < 1) fail("target_intervals = {}: must be >= 1", target_intervals);
  if (max_value == 0) return {0, 1};
  const double raw_step = max_value / target_intervals;
  int exponent = static_cast<int>(std::floor(std::log10(raw_step)));
  const double fraction = raw_step / std::pow(10.0, exponent);
  // The tolerance keeps an exact 2 that arrives as 2.0000000000000004 from jumping to 5.
  constexpr double kTolerance = 1e-9;
  int mantissa = fraction <= 1 + kTolerance ? 1 : fraction <= 2 + kTolerance ? 2 : fraction <= 5 + kTolerance ? 5 : 10;
  if (mantissa == 10) {
    mantissa = 1;
    ++exponent;
  }
  // For negative exponents divide by an exact power of ten: 3 * 0.1 is 0.30000000000000004 but 3 / 10
  // is 0.3, and the labels print these values. Past 1e300 that power would overflow, so multiply.
  const bool divide = exponent < 0 && exponent > -300;
  const double scale = std::pow(10.0, divide ? -exponent : exponent);
  auto tick = [&](int i) {
    const double units = static_cast<double>(i * mantissa);
    return divide ? units / scale : units * scale;
  };
  std::vector<double> ticks = {0.0};
  // The bound only guards against a degenerate scale; a nice step reaches max_value in about
  // target_intervals steps.
  for (int i = 1; ticks.back() < max_value && i <= 10 * target_intervals + 10; ++i) ticks.push_back(tick(i));
  return ticks;
}

std::string xml_escape(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (char ch : text) {
    switch (ch) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default:
        // Control characters other than tab and newlines are not allowed in XML 1.0 at all.
        out += (static_cast<unsigned char>(ch) < 0x20 && ch != '\t' && ch != '\n' && ch != '\r') ? '?' : ch;
    }
  }
  return out;
}

std::string bar_chart_svg(const BarChart& chart) {
  chart.validate();
  const auto n_categories = static_cast<double>(chart.categories.size());
  const auto n_series = static_cast<double>(chart.series.size());

  double max_value = 0;
  for (const auto& s : chart.series) {
    for (double v : s.values) max_value = std::max(max_value, v);
  }
  const std::vector<double> ticks = nice_ticks(max_value);
  const double y_max = ticks.back();

  const double top = chart.title.empty() ? 20 : 44;
  const double plot_width = std::clamp(n_categories * (n_series * kPreferredBarWidth) / (1 - kGroupGapFraction),
                                       kMinPlotWidth, kMaxPlotWidth);
  const double group_width = plot_width / n_categories;
  const double bar_width = group_width * (1 - kGroupGapFraction) / n_series;
  const double base = top + kPlotHeight;
  auto y_of = [&](double value) { return base - value / y_max * kPlotHeight; };

  std::vector<std::string> names;
  for (const auto& s : chart.series) names.push_back(s.name);
  const double legend_x = kLeft + plot_width + kLegendGap;
  const double width = legend_x + 18 + kCharWidth * static_cast<double>(longest(names)) + 12;
  const double height = std::max(base + kBottom, top + n_series * kLegendRow + 10);

  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" "
      "font-family=\"sans-serif\" font-size=\"12\">\n"
      "<rect class=\"background\" width=\"100%\" height=\"100%\" fill=\"white\"/>\n",
      num(width), num(height));
  if (!chart.title.empty()) {
    svg += fmt::format("<text class=\"title\" x=\"{}\" y=\"26\" text-anchor=\"middle\" font-size=\"16\">{}</text>\n",
                       num(kLeft + plot_width / 2), xml_escape(chart.title));
  }
  if (!chart.y_label.empty()) {
    svg += fmt::format(
        "<text class=\"y-label\" transform=\"rotate(-90)\" x=\"{}\" y=\"16\" text-anchor=\"middle\">{}</text>\n",
        num(-(top + kPlotHeight / 2)), xml_escape(chart.y_label));
  }
  for (double t : ticks) {
    svg += fmt::format("<line class=\"grid\" x1=\"{0}\" y1=\"{2}\" x2=\"{1}\" y2=\"{2}\" stroke=\"#dddddd\"/>\n",
                       num(kLeft), num(kLeft + plot_width), num(y_of(t)));
    svg += fmt::format(
        "<text class=\"tick\" x=\"{}\" y=\"{}\" text-anchor=\"end\" dominant-baseline=\"middle\">{:g}</text>\n",
        num(kLeft - 6), num(y_of(t)), t);
  }

  for (std::size_t s = 0; s < chart.series.size(); ++s) {
    const auto& series = chart.series[s];
    for (std::size_t c = 0; c < chart.categories.size(); ++c) {
      const double value = series.values[c];
      const double x = kLeft + static_cast<double>(c) * group_width + group_width * kGroupGapFraction / 2 +
                       static_cast<double>(s) * bar_width;
      svg += fmt::format(
          "<rect class=\"bar\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\">"
          "<title>{}, {}: {:g}</title></rect>\n",
          num(x), num(y_of(value)), num(bar_width), num(base - y_of(value)), kPalette[s], xml_escape(series.name),
          xml_escape(chart.categories[c]), value);
    }
  }

  // Axes after the bars so zero-height bars do not hide the baseline.
  svg += fmt::format("<line class=\"axis\" x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"black\"/>\n",
                     num(kLeft), num(top), num(base));
  svg += fmt::format("<line class=\"axis\" x1=\"{0}\" y1=\"{2}\" x2=\"{1}\" y2=\"{2}\" stroke=\"black\"/>\n",
                     num(kLeft), num(kLeft + plot_width), num(base));

  // Label every k-th category when the labels would overlap (64 ranks on a 960 px axis).
  const double label_width = kCharWidth * static_cast<double>(longest(chart.categories)) + 6;
  const auto label_every = static_cast<std::size_t>(std::max(1.0, std::ceil(label_width / group_width)));
  for (std::size_t c = 0; c < chart.categories.size(); c += label_every) {
    svg += fmt::format("<text class=\"category\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n",
                       num(kLeft + (static_cast<double>(c) + 0.5) * group_width), num(base + 18),
                       xml_escape(chart.categories[c]));
  }

  for (std::size_t s = 0; s < chart.series.size(); ++s) {
    const double y = top + static_cast<double>(s) * kLegendRow;
    svg += fmt::format("<rect class=\"legend-swatch\" x=\"{}\" y=\"{}\" width=\"12\" height=\"12\" fill=\"{}\"/>\n",
                       num(legend_x), num(y), kPalette[s]);
    svg += fmt::format("<text class=\"legend\" x=\"{}\" y=\"{}\" dominant-baseline=\"middle\">{}</text>\n",
                       num(legend_x + 18), num(y + 6), xml_escape(chart.series[s].name));
  }
  svg += "</svg>";
  return svg;
}

}  // namespace fulcrum

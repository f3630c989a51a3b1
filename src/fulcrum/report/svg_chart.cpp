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

// Layout in pixels.
constexpr double kPad = 12;  // canvas edge to anything drawn
constexpr double kFont = 12;
constexpr double kTitleFont = 16;
constexpr double kPanelTitleFont = 13;
constexpr double kBarLabelFont = 11;
constexpr double kGap = 6;              // a label to what it labels
constexpr double kPlotHeight = 260;     // one row of panels
constexpr double kRowPlotHeight = 180;  // each of several rows
constexpr double kMinPlotWidth = 200;   // so a chart of one group is not a sliver
constexpr double kMaxPlotWidth = 960;   // a panel wider than this continues in another row
constexpr double kMaxGridWidth = 1240;  // panels side by side up to this width
constexpr double kPanelGap = 28;        // between panels, both ways
constexpr double kGroupPad = 12;        // between neighbouring groups (also between their labels)
constexpr double kBarLabelRoom = 4;     // a labelled bar's gap to its neighbour
constexpr double kPreferredSlot = 16;   // width per plain bar a chart grows to make room for
constexpr double kPreferredLabelledSlot = 24;
constexpr double kMaxSlot = 32;  // bars widen to this where the labels make the groups wide
constexpr double kMinSlot = 5;
constexpr double kLegendGap = 20;
constexpr double kSwatch = 12;
constexpr double kLegendRow = 18;

double line_height(double font_size) { return kLineEm * font_size; }
std::string num(double value) { return fmt::format("{:.1f}", value); }

std::string join(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& line : lines) out += (out.empty() ? "" : " ") + line;
  return out;
}

/// Greedy: as many words on a line as fit in max_width (a word wider than that gets a line of its own).
std::vector<std::string> wrap(const std::string& text, double max_width, double font_size) {
  std::vector<std::string> lines;
  for (const auto& word : split_words(text)) {
    if (!lines.empty() && text_width(lines.back() + " " + word, font_size) <= max_width) {
      lines.back() += " " + word;
    } else {
      lines.push_back(word);
    }
  }
  return lines;
}

enum class LabelForm { kOneLine, kWrapped, kVertical };

// How the groups are drawn: the same in every panel, chosen so the widest panel fits.
struct Shape {
  LabelForm form = LabelForm::kVertical;
  double slot = kMinSlot;  // horizontal room per bar, at least
  double group_width = 0;  // at least: the bars, or the group label, plus kGroupPad
};

Shape choose_shape(const BarChart& chart) {
  const bool labelled = chart.stacked();  // colours name the segments, so a label names each bar
  const double label_slot = labelled ? line_height(kBarLabelFont) + kBarLabelRoom : 0;
  const auto n_bars = static_cast<double>(chart.bar_names.size());
  std::size_t widest_panel = 0;
  double one_line = 0, longest_word = 0;
  for (const auto& panel : chart.panels) {
    widest_panel = std::max(widest_panel, panel.groups.size());
    for (const auto& group : panel.groups) {
      one_line = std::max(one_line, text_width(group.label, kFont));
      for (const auto& word : split_words(group.label)) longest_word = std::max(longest_word, text_width(word, kFont));
    }
  }
  const std::array<std::pair<LabelForm, double>, 3> forms = {{{LabelForm::kOneLine, one_line},
                                                              {LabelForm::kWrapped, longest_word},
                                                              {LabelForm::kVertical, line_height(kFont)}}};
  const std::array<double, 2> slots = {std::max(labelled ? kPreferredLabelledSlot : kPreferredSlot, label_slot),
                                       std::max(kMinSlot, label_slot)};
  // A readable label first, wide bars second: one line with thin bars beats wrapped labels.
  for (const auto& [form, need] : forms) {
    for (double slot : slots) {
      const double width = std::max(n_bars * slot, need) + kGroupPad;
      if (static_cast<double>(widest_panel) * width <= kMaxPlotWidth) return {form, slot, width};
    }
  }
  return {LabelForm::kVertical, slots[1], std::max(n_bars * slots[1], line_height(kFont)) + kGroupPad};
}

// A panel, or the part of one that fits in a row.
struct Cell {
  std::string title;
  const BarGroup* groups = nullptr;
  std::size_t count = 0;
};

struct Canvas {
  std::string body;
  std::vector<ChartLabel> labels;

  void text(const TextSpec& spec) {
    body += text_svg(spec);
    labels.push_back({spec.css_class, join(spec.lines), text_box(spec)});
  }
  void rect(const std::string& attributes, const std::string& title = "") {
    body += title.empty() ? fmt::format("<rect {}/>\n", attributes)
                          : fmt::format("<rect {}><title>{}</title></rect>\n", attributes, xml_escape(title));
  }
  void line(const char* css_class, double x1, double y1, double x2, double y2, const char* colour) {
    body += fmt::format("<line class=\"{}\" x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"{}\"/>\n", css_class,
                        num(x1), num(y1), num(x2), num(y2), colour);
  }
};

// Panels too wide for a row continue in the next.
std::vector<Cell> split_into_cells(const BarChart& chart, const Shape& shape) {
  const auto per_row = static_cast<std::size_t>(std::max(1.0, std::floor(kMaxPlotWidth / shape.group_width)));
  std::vector<Cell> cells;
  for (const auto& panel : chart.panels) {
    for (std::size_t at = 0; at < panel.groups.size(); at += per_row) {
      const std::string title = at == 0 || panel.title.empty() ? panel.title : panel.title + " (cont.)";
      cells.push_back({title, panel.groups.data() + at, std::min(per_row, panel.groups.size() - at)});
    }
  }
  return cells;
}

// The value scale, shared by every panel: nice ticks up to the tallest bar.
std::vector<double> value_ticks(const BarChart& chart) {
  double max_value = 0;
  for (const auto& panel : chart.panels) {
    for (const auto& group : panel.groups) {
      for (const auto& bar : group.bars) {
        double sum = 0;
        for (double v : bar) sum += v;
        max_value = std::max(max_value, sum);
      }
    }
  }
  return nice_ticks(max_value);
}

// Every size the drawing needs, decided before anything is drawn: the cells of the grid are all alike, so
// the panels line up, and the room under each axis fits the tallest bar and group labels of any cell.
struct Layout {
  Shape shape;
  std::vector<double> ticks;
  double axis_width = 0;  // the tick labels left of a plot, and their gap
  double plot_width = 0, plot_height = 0;
  double cell_width = 0, cell_height = 0;
  std::size_t columns = 1, rows = 1;
  double slot = 0;  // horizontal room per bar
  bool bar_labels = false;
  bool vertical_bar_labels = false;
  double bar_label_height = 0;
  double wrap_width = 0;  // of a wrapped group label
  double panel_title_height = 0;
  double plot_offset = 0;  // a cell's top to its plot's top
};

// Widths: every cell alike, as wide as the most groups of any cell or the widest panel title.
double plot_width_of(const std::vector<Cell>& cells, const Shape& shape) {
  double plot_width = cells.size() == 1 ? kMinPlotWidth : 0;
  for (const auto& cell : cells) {
    plot_width = std::max(plot_width, static_cast<double>(cell.count) * shape.group_width);
    if (!cell.title.empty()) {
      const TextBox box =
          text_box({"panel-title", {cell.title}, 0, 0, TextAlign::kStart, false, kPanelTitleFont, true});
      plot_width = std::max(plot_width, box.x1 - box.x0 + kGroupPad);
    }
  }
  return plot_width;
}

// The room group labels take under the bar labels: the longest label standing, or the most lines of any
// label wrapped, or one line.
double group_label_height(const std::vector<Cell>& cells, const Shape& shape, double wrap_width) {
  std::size_t label_lines = 1;
  double longest_label = 0;
  for (const auto& cell : cells) {
    for (std::size_t g = 0; g < cell.count; ++g) {
      label_lines = std::max(label_lines, wrap(cell.groups[g].label, wrap_width, kFont).size());
      longest_label = std::max(longest_label, text_width(cell.groups[g].label, kFont));
    }
  }
  return shape.form == LabelForm::kVertical  ? longest_label
         : shape.form == LabelForm::kWrapped ? static_cast<double>(label_lines) * line_height(kFont)
                                             : line_height(kFont);
}

Layout lay_out(const BarChart& chart, const Shape& shape, const std::vector<Cell>& cells) {
  Layout layout;
  layout.shape = shape;
  layout.ticks = value_ticks(chart);
  double tick_width = 0;
  for (double t : layout.ticks) tick_width = std::max(tick_width, text_width(fmt::format("{:g}", t), kFont));

  // The grid: as many cells side by side as fit kMaxGridWidth; lower plots when there are several rows.
  layout.plot_width = plot_width_of(cells, shape);
  layout.axis_width = tick_width + kGap;
  layout.cell_width = layout.axis_width + layout.plot_width;
  layout.columns = std::clamp<std::size_t>(
      static_cast<std::size_t>(std::floor((kMaxGridWidth + kPanelGap) / (layout.cell_width + kPanelGap))), 1,
      cells.size());
  layout.rows = (cells.size() + layout.columns - 1) / layout.columns;
  layout.plot_height = layout.rows > 1 ? kRowPlotHeight : kPlotHeight;

  // Heights under the axis: bar labels (stacked charts only: their colours name the segments), standing
  // when the longest bar name is wider than a bar's slot; then group labels.
  const auto n_bars = static_cast<double>(chart.bar_names.size());
  layout.slot = std::clamp((shape.group_width - kGroupPad) / n_bars, shape.slot, kMaxSlot);
  double bar_name_width = 0;
  for (const auto& name : chart.bar_names) bar_name_width = std::max(bar_name_width, text_width(name, kBarLabelFont));
  layout.bar_labels = chart.stacked();
  layout.vertical_bar_labels = bar_name_width > layout.slot - 2;
  layout.bar_label_height =
      !layout.bar_labels ? 0 : (layout.vertical_bar_labels ? bar_name_width : line_height(kBarLabelFont)) + kGap;
  layout.wrap_width = shape.group_width - kGroupPad;
  const bool any_panel_title = std::any_of(cells.begin(), cells.end(), [](const Cell& c) { return !c.title.empty(); });
  layout.panel_title_height = any_panel_title ? line_height(kPanelTitleFont) + kGap : 0;
  layout.plot_offset = layout.panel_title_height + line_height(kFont) / 2;  // the top tick label's upper half
  layout.cell_height = layout.plot_offset + layout.plot_height + kGap + layout.bar_label_height +
                       group_label_height(cells, shape, layout.wrap_width);
  return layout;
}

// Where the grid of cells sits on the canvas, and how far the drawing reaches so far.
struct Grid {
  double top = 0, left = 0, width = 0, height = 0;
  double right = 0, bottom = 0;
};

Grid place_grid(const BarChart& chart, const Layout& layout) {
  Grid grid;
  const double title_height = chart.title.empty() ? 0 : line_height(kTitleFont) + 2 * kGap;
  grid.top = kPad + title_height;
  grid.left = kPad + (chart.y_label.empty() ? 0 : line_height(kFont) + kGap);
  const auto columns = static_cast<double>(layout.columns), rows = static_cast<double>(layout.rows);
  grid.width = columns * layout.cell_width + static_cast<double>(layout.columns - 1) * kPanelGap;
  grid.height = rows * layout.cell_height + static_cast<double>(layout.rows - 1) * kPanelGap;
  grid.bottom = grid.top + grid.height;
  grid.right = grid.left + grid.width;
  return grid;
}

// The y label stands left of the grid, the x label sits under it; either may push the canvas's extent.
void draw_axis_labels(Canvas& canvas, const BarChart& chart, Grid& grid) {
  if (!chart.y_label.empty()) {
    const double span = std::max(grid.height, text_width(chart.y_label, kFont));
    canvas.text({"y-label",
                 {chart.y_label},
                 kPad + line_height(kFont) / 2,
                 grid.top + span / 2,
                 TextAlign::kMiddle,
                 true,
                 kFont,
                 false});
    grid.bottom = std::max(grid.bottom, grid.top + span);
  }
  if (!chart.x_label.empty()) {
    const double half = text_width(chart.x_label, kFont) / 2;
    canvas.text({"x-label",
                 {chart.x_label},
                 std::max(grid.left + grid.width / 2, kPad + half),
                 grid.bottom + kGap,
                 TextAlign::kMiddle,
                 false,
                 kFont,
                 false});
    grid.bottom += kGap + line_height(kFont);
    grid.right = std::max(grid.right, std::max(grid.left + grid.width / 2, kPad + half) + half);
  }
}

// One cell's plot on the canvas: value v is drawn at height y_of(v).
struct Plot {
  double left = 0, top = 0, base = 0;
  double width = 0, height = 0;
  double y_max = 0;
  [[nodiscard]] double y_of(double value) const { return base - value / y_max * height; }
};

// A group's bars side by side around `centre`, each a stack of its segments, with its bar labels; then the
// group's label under them.
void draw_group(Canvas& canvas, const BarChart& chart, const Layout& layout, const Plot& plot, const BarGroup& group,
                double centre) {
  const bool stacked = chart.stacked();
  const double slot = layout.slot;
  const double bar_width = slot - (layout.bar_labels ? kBarLabelRoom : 1);
  const double first = centre - static_cast<double>(chart.bar_names.size()) * slot / 2;
  for (std::size_t b = 0; b < group.bars.size(); ++b) {
    const double x = first + static_cast<double>(b) * slot + (slot - bar_width) / 2;
    double level = 0;
    for (std::size_t s = 0; s < group.bars[b].size(); ++s) {
      const double value = group.bars[b][s];
      const std::string tooltip =
          stacked ? fmt::format("{}, {}, {}: {:g}", chart.segment_names[s], chart.bar_names[b], group.label, value)
                  : fmt::format("{}, {}: {:g}", chart.bar_names[b], group.label, value);
      canvas.rect(fmt::format("class=\"bar\" data-group=\"{}\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" "
                              "fill=\"{}\"",
                              xml_escape(group.label), num(x), num(plot.y_of(level + value)), num(bar_width),
                              num(plot.y_of(level) - plot.y_of(level + value)), kPalette[stacked ? s : b]),
                  tooltip);
      level += value;
    }
    if (layout.bar_labels) {
      canvas.text({"bar-label",
                   {chart.bar_names[b]},
                   x + bar_width / 2,
                   plot.base + kGap,
                   layout.vertical_bar_labels ? TextAlign::kStart : TextAlign::kMiddle,
                   layout.vertical_bar_labels,
                   kBarLabelFont,
                   false});
    }
  }
  const double label_top = plot.base + kGap + layout.bar_label_height;
  if (layout.shape.form == LabelForm::kVertical) {
    canvas.text({"group", {group.label}, centre, label_top, TextAlign::kStart, true, kFont, false});
  } else {
    const auto lines = layout.shape.form == LabelForm::kWrapped ? wrap(group.label, layout.wrap_width, kFont)
                                                                : std::vector<std::string>{group.label};
    canvas.text({"group", lines, centre, label_top, TextAlign::kMiddle, false, kFont, false});
  }
}

// A cell whose top left corner is (cell_x, cell_y): its panel title, gridlines and tick labels, the groups
// spread over the plot, the axes.
void draw_cell(Canvas& canvas, const BarChart& chart, const Layout& layout, const Cell& cell, double cell_x,
               double cell_y) {
  Plot plot;
  plot.left = cell_x + layout.axis_width;
  plot.top = cell_y + layout.plot_offset;
  plot.base = plot.top + layout.plot_height;
  plot.width = layout.plot_width;
  plot.height = layout.plot_height;
  plot.y_max = layout.ticks.back();

  if (!cell.title.empty()) {
    canvas.text({"panel-title",
                 {cell.title},
                 plot.left + plot.width / 2,
                 cell_y,
                 TextAlign::kMiddle,
                 false,
                 kPanelTitleFont,
                 true});
  }
  for (double t : layout.ticks) {
    canvas.line("grid", plot.left, plot.y_of(t), plot.left + plot.width, plot.y_of(t), "#dddddd");
    canvas.text({"tick",
                 {fmt::format("{:g}", t)},
                 plot.left - kGap,
                 plot.y_of(t) - line_height(kFont) / 2,
                 TextAlign::kEnd,
                 false,
                 kFont,
                 false});
  }
  const double group_width = plot.width / static_cast<double>(cell.count);
  for (std::size_t g = 0; g < cell.count; ++g) {
    draw_group(canvas, chart, layout, plot, cell.groups[g], plot.left + (static_cast<double>(g) + 0.5) * group_width);
  }
  // Axes after the bars so zero-height bars do not hide the baseline.
  canvas.line("axis", plot.left, plot.top, plot.left, plot.base, "black");
  canvas.line("axis", plot.left, plot.base, plot.left + plot.width, plot.base, "black");
}

// The legend right of the grid names the colours; for stacks top segment first, as they are drawn. It
// sets the canvas's right edge and may push its bottom.
void draw_legend(Canvas& canvas, const BarChart& chart, const Layout& layout, Grid& grid) {
  const bool stacked = chart.stacked();
  const std::vector<std::string>& names = stacked ? chart.segment_names : chart.bar_names;
  const double legend_x = grid.right + kLegendGap;
  const double legend_top = grid.top + layout.panel_title_height;
  for (std::size_t i = 0; i < names.size(); ++i) {
    const std::size_t colour = stacked ? names.size() - 1 - i : i;
    const double y = legend_top + static_cast<double>(i) * kLegendRow;
    canvas.rect(fmt::format("class=\"legend-swatch\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\"",
                            num(legend_x), num(y + (kLegendRow - kSwatch) / 2), num(kSwatch), num(kSwatch),
                            kPalette[colour]));
    canvas.text({"legend",
                 {names[colour]},
                 legend_x + kSwatch + kGap,
                 y + (kLegendRow - line_height(kFont)) / 2,
                 TextAlign::kStart,
                 false,
                 kFont,
                 false});
  }
  double legend_width = 0;
  for (const auto& name : names) legend_width = std::max(legend_width, text_width(name, kFont));
  grid.right = legend_x + kSwatch + kGap + legend_width;
  grid.bottom = std::max(grid.bottom, legend_top + static_cast<double>(names.size()) * kLegendRow);
}

// The title last, centred on the canvas it now knows the width of; the document around the body.
RenderedChart finish(Canvas canvas, const BarChart& chart, const Grid& grid) {
  RenderedChart out;
  out.width = std::ceil(std::max(grid.right + kPad, text_width(chart.title, kTitleFont) + 2 * kPad));
  out.height = std::ceil(grid.bottom + kPad);
  if (!chart.title.empty()) {
    canvas.text({"title", {chart.title}, out.width / 2, kPad, TextAlign::kMiddle, false, kTitleFont, false});
  }
  out.svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" "
      "font-family=\"sans-serif\" font-size=\"{2:g}\">\n"
      "<rect class=\"background\" width=\"100%\" height=\"100%\" fill=\"white\"/>\n{3}</svg>",
      out.width, out.height, kFont, canvas.body);
  out.labels = std::move(canvas.labels);
  return out;
}

}  // namespace

void BarChart::validate() const {
  if (panels.empty()) fail("panels: none given, need at least one");
  if (bar_names.empty()) fail("bar_names: none given, need at least one");
  if (segment_names.empty()) fail("segment_names: none given, need at least one");
  const std::size_t colours = stacked() ? segment_names.size() : bar_names.size();
  if (colours > kPalette.size()) {
    fail("{}: {} names, at most {} (one distinct palette colour each)", stacked() ? "segment_names" : "bar_names",
         colours, kPalette.size());
  }
  for (std::size_t p = 0; p < panels.size(); ++p) {
    if (panels[p].groups.empty()) fail("panels[{}].groups: none given, need at least one", p);
    for (std::size_t g = 0; g < panels[p].groups.size(); ++g) {
      const auto& group = panels[p].groups[g];
      const std::string field = fmt::format("panels[{}].groups[{}]", p, g);
      if (split_words(group.label).empty()) fail("{}.label: empty, every group needs a label", field);
      if (group.bars.size() != bar_names.size()) {
        fail("{}.bars: {} bars for {} bar names", field, group.bars.size(), bar_names.size());
      }
      for (std::size_t b = 0; b < group.bars.size(); ++b) {
        const auto& bar = group.bars[b];
        if (bar.size() != segment_names.size()) {
          fail("{}.bars[{}]: {} values for {} segment names", field, b, bar.size(), segment_names.size());
        }
        for (std::size_t s = 0; s < bar.size(); ++s) {
          if (!std::isfinite(bar[s]) || bar[s] < 0) {
            fail("{}.bars[{}][{}] = {}: must be finite and >= 0", field, b, s, bar[s]);
          }
        }
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

RenderedChart render_bar_chart(const BarChart& chart) {
  chart.validate();
  const Shape shape = choose_shape(chart);
  const std::vector<Cell> cells = split_into_cells(chart, shape);
  const Layout layout = lay_out(chart, shape, cells);

  // The canvas: title, y label, the grid of cells, x label, legend.
  Canvas canvas;
  Grid grid = place_grid(chart, layout);
  draw_axis_labels(canvas, chart, grid);
  for (std::size_t c = 0; c < cells.size(); ++c) {
    const std::size_t row = c / layout.columns;  // whole rows: integer division meant
    const double cell_x = grid.left + static_cast<double>(c % layout.columns) * (layout.cell_width + kPanelGap);
    const double cell_y = grid.top + static_cast<double>(row) * (layout.cell_height + kPanelGap);
    draw_cell(canvas, chart, layout, cells[c], cell_x, cell_y);
  }
  draw_legend(canvas, chart, layout, grid);
  return finish(std::move(canvas), chart, grid);
}

std::string bar_chart_svg(const BarChart& chart) { return render_bar_chart(chart).svg; }

}  // namespace fulcrum

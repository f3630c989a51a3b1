// Text in the SVG charts: a conservative width estimate (there are no font metrics without a renderer),
// word wrapping, XML escaping, and <text> elements emitted together with the box they occupy, so a layout
// can size its margins from its labels and a test can check that no two labels overlap.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace fulcrum {

/// The estimated advance width of `text` at `font_size` px in a sans-serif face. Per character class it
/// takes at least the widest glyph of DejaVu Sans (the widest common sans-serif, and Debian's default);
/// narrower faces (Liberation Sans, Arial, Helvetica) come out smaller, so a layout sized from it fits.
double text_width(std::string_view text, double font_size);

/// Height of one line of text and the distance between baselines, as a multiple of the font size: the
/// ink of any ASCII glyph fits between 0.95 em above the baseline and 0.3 em below it.
inline constexpr double kLineEm = 1.25;

/// `text` split at spaces (runs of spaces count as one; no empty words).
std::vector<std::string> split_words(std::string_view text);

/// Escapes &, <, >, " and ' for XML text and attribute values; control characters become '?'.
std::string xml_escape(std::string_view text);

/// An axis-aligned box in canvas pixels.
struct TextBox {
  double x0 = 0, y0 = 0, x1 = 0, y1 = 0;
  [[nodiscard]] bool overlaps(const TextBox& other) const {
    return x0 < other.x1 && other.x0 < x1 && y0 < other.y1 && other.y0 < y1;
  }
};

enum class TextAlign { kStart, kMiddle, kEnd };

/// A text element placed by its box. Horizontal text: `x` is the box's left edge, centre or right edge
/// (by `align`) and `y` its top; each entry of `lines` is one line. Vertical text (reading upwards, rotated
/// -90 degrees; one line only): `x` is the box's horizontal centre and `y` its top, centre or bottom.
struct TextSpec {
  std::string css_class;
  std::vector<std::string> lines;
  double x = 0, y = 0;
  TextAlign align = TextAlign::kStart;
  bool vertical = false;
  double font_size = 12;
  bool bold = false;
};

/// The box `spec` occupies (estimated as text_width and kLineEm describe).
TextBox text_box(const TextSpec& spec);

/// The <text> element (with one <tspan> per line when there are several), ending in a newline.
std::string text_svg(const TextSpec& spec);

}  // namespace fulcrum

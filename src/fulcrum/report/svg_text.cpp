#include "fulcrum/report/svg_text.hpp"

#include "fulcrum/core/error.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace fulcrum {
namespace {

// Glyph ink relative to the baseline, in em, and the bold face's extra width (DejaVu Sans Bold is at most
// 1.12 times as wide as the book face, per glyph).
constexpr double kAscentEm = 0.95;
constexpr double kBoldFactor = 1.12;

// Advance widths in em by class, each the widest member's in DejaVu Sans rounded up (measured with
// rsvg-convert at 100 px): i, l, punctuation 0.28-0.40; lower case, digits and most upper case up to 0.64;
// the rounder capitals up to 0.79; m, w, M, W, @, %, and the operators up to 1.0.
double char_em(char ch) {
  static constexpr std::string_view kNarrow = " !'(),-./:;I[\\]fijlrt|J";
  static constexpr std::string_view kRoundCaps = "ABCDGHKNOQRUVXZ&";
  static constexpr std::string_view kWide = "mwMW@%#+<=>^~";
  if (kNarrow.find(ch) != std::string_view::npos) return 0.42;
  if (kRoundCaps.find(ch) != std::string_view::npos) return 0.8;
  if (kWide.find(ch) != std::string_view::npos) return 1.0;
  return 0.65;
}

std::string num(double value) { return fmt::format("{:.1f}", value); }

const char* anchor_name(TextAlign align) {
  switch (align) {
    case TextAlign::kStart: return "start";
    case TextAlign::kMiddle: return "middle";
    case TextAlign::kEnd: return "end";
  }
  return "start";
}

double line_width(const TextSpec& spec) {
  double width = 0;
  for (const auto& line : spec.lines) width = std::max(width, text_width(line, spec.font_size));
  return spec.bold ? width * kBoldFactor : width;
}

}  // namespace

double text_width(std::string_view text, double font_size) {
  double em = 0;
  for (char ch : text) {
    const auto byte = static_cast<unsigned char>(ch);
    if (byte >= 0x80 && byte < 0xC0) continue;  // a UTF-8 continuation byte: its code point counted once
    em += byte >= 0x80 ? 1.0 : char_em(ch);
  }
  return em * font_size;
}

std::vector<std::string> split_words(std::string_view text) {
  std::vector<std::string> words;
  std::size_t at = 0;
  while (at < text.size()) {
    const std::size_t start = text.find_first_not_of(' ', at);
    if (start == std::string_view::npos) break;
    const std::size_t end = std::min(text.find(' ', start), text.size());
    words.emplace_back(text.substr(start, end - start));
    at = end;
  }
  return words;
}

std::string xml_escape(std::string_view text) {
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

TextBox text_box(const TextSpec& spec) {
  FULCRUM_CHECK(!spec.lines.empty(), "a text element needs a line");
  FULCRUM_CHECK(!spec.vertical || spec.lines.size() == 1, "vertical text is one line");
  const double width = line_width(spec);
  const double line = kLineEm * spec.font_size;
  if (spec.vertical) {
    const double top = spec.align == TextAlign::kStart    ? spec.y
                       : spec.align == TextAlign::kMiddle ? spec.y - width / 2
                                                          : spec.y - width;
    return {spec.x - line / 2, top, spec.x + line / 2, top + width};
  }
  const double left = spec.align == TextAlign::kStart    ? spec.x
                      : spec.align == TextAlign::kMiddle ? spec.x - width / 2
                                                         : spec.x - width;
  return {left, spec.y, left + width, spec.y + line * static_cast<double>(spec.lines.size())};
}

std::string text_svg(const TextSpec& spec) {
  text_box(spec);  // checks the spec
  const std::string attributes =
      fmt::format("class=\"{}\"{}{}", xml_escape(spec.css_class),
                  spec.font_size == 12 ? "" : fmt::format(" font-size=\"{:g}\"", spec.font_size),
                  spec.bold ? " font-weight=\"bold\"" : "");
  if (spec.vertical) {
    // Rotated -90 degrees the ascent points left: the baseline sits right of the box's centre line. The
    // text reads upwards, so the box's top is where the text ends.
    const double x = spec.x + (kAscentEm - kLineEm / 2) * spec.font_size;
    const char* anchor = spec.align == TextAlign::kStart    ? "end"
                         : spec.align == TextAlign::kMiddle ? "middle"
                                                            : "start";
    return fmt::format("<text {} transform=\"rotate(-90 {} {})\" x=\"{}\" y=\"{}\" text-anchor=\"{}\">{}</text>\n",
                       attributes, num(x), num(spec.y), num(x), num(spec.y), anchor, xml_escape(spec.lines[0]));
  }
  const auto baseline = [&](std::size_t i) {
    return spec.y + (kAscentEm + kLineEm * static_cast<double>(i)) * spec.font_size;
  };
  if (spec.lines.size() == 1) {
    return fmt::format("<text {} x=\"{}\" y=\"{}\" text-anchor=\"{}\">{}</text>\n", attributes, num(spec.x),
                       num(baseline(0)), anchor_name(spec.align), xml_escape(spec.lines[0]));
  }
  std::string svg = fmt::format("<text {} text-anchor=\"{}\">", attributes, anchor_name(spec.align));
  for (std::size_t i = 0; i < spec.lines.size(); ++i) {
    svg += fmt::format("<tspan x=\"{}\" y=\"{}\">{}</tspan>", num(spec.x), num(baseline(i)), xml_escape(spec.lines[i]));
  }
  return svg + "</text>\n";
}

}  // namespace fulcrum

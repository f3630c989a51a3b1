#include "fulcrum/report/svg_text.hpp"

#include "fulcrum/core/error.hpp"

#include <gtest/gtest.h>

#include <map>
#include <string>

namespace fulcrum {
namespace {

// DejaVu Sans advance widths in em, measured independently: each character drawn 20 times at 100 px by
// rsvg-convert 2.54, its width read from `rsvg-convert --export-id` (scripts/svg_label_check.py uses the
// same renderer on whole charts).
const std::map<char, double>& dejavu_em() {
  static const std::map<char, double> widths = {
      {' ', 0.318}, {'\'', 0.275}, {'i', 0.278}, {'l', 0.278}, {'I', 0.295}, {'.', 0.318}, {'/', 0.337}, {'|', 0.337},
      {'f', 0.352}, {'-', 0.361},  {'(', 0.39},  {'t', 0.392}, {'r', 0.394}, {'!', 0.401}, {'_', 0.5},   {'s', 0.521},
      {'c', 0.55},  {'L', 0.557},  {'k', 0.579}, {'x', 0.592}, {'T', 0.594}, {'o', 0.612}, {'a', 0.613}, {'e', 0.615},
      {'n', 0.634}, {'p', 0.635},  {'0', 0.636}, {'9', 0.636}, {'{', 0.636}, {'K', 0.656}, {'V', 0.684}, {'B', 0.686},
      {'A', 0.711}, {'H', 0.752},  {'O', 0.787}, {'Q', 0.787}, {'&', 0.78},  {'w', 0.818}, {'+', 0.838}, {'=', 0.838},
      {'<', 0.838}, {'M', 0.863},  {'%', 0.95},  {'m', 0.974}, {'W', 0.989}, {'@', 1.0}};
  return widths;
}

TEST(SvgText, WidthEstimateIsAtLeastDejaVuSansButNotFarAbove) {
  for (const auto& [ch, em] : dejavu_em()) {
    const double estimate = text_width(std::string(1, ch), 100);
    EXPECT_GE(estimate, 100 * em) << "'" << ch << "'";
    EXPECT_LE(estimate, 100 * em * 1.6) << "'" << ch << "'";
  }
  // A typical label: within 25% above its DejaVu width (0.974 + 0.613 + 0.592 + 0.361 + ...).
  const std::string label = "max-doc-len=131072";
  double dejavu = 0;
  for (char ch : label) dejavu += ch >= '0' && ch <= '9' ? 0.636 : dejavu_em().at(ch == 'd' ? 'p' : ch);
  EXPECT_GE(text_width(label, 12), 12 * dejavu);
  EXPECT_LE(text_width(label, 12), 12 * dejavu * 1.25);
  EXPECT_EQ(text_width("", 12), 0);
  // A UTF-8 character counts once, as a wide one.
  EXPECT_EQ(text_width("\xc3\x97", 10), 10);
}

TEST(SvgText, SplitsWordsAtSpaces) {
  EXPECT_EQ(split_words("  gpus=64  dataset=prolong "), (std::vector<std::string>{"gpus=64", "dataset=prolong"}));
  EXPECT_TRUE(split_words("   ").empty());
  EXPECT_EQ(xml_escape(std::string("a\x01\tb<&>\"'")), "a?\tb&lt;&amp;&gt;&quot;&apos;");
}

TEST(SvgText, BoxFollowsAlignmentLinesAndRotation) {
  const double w = text_width("rank", 12);
  const double line = kLineEm * 12;
  TextSpec spec{"group", {"rank"}, 100, 50, TextAlign::kMiddle, false, 12, false};
  TextBox box = text_box(spec);
  EXPECT_DOUBLE_EQ(box.x0, 100 - w / 2);
  EXPECT_DOUBLE_EQ(box.x1, 100 + w / 2);
  EXPECT_DOUBLE_EQ(box.y0, 50);
  EXPECT_DOUBLE_EQ(box.y1, 50 + line);
  spec.lines = {"rank", "r"};
  spec.align = TextAlign::kEnd;
  box = text_box(spec);
  EXPECT_DOUBLE_EQ(box.x1, 100);
  EXPECT_DOUBLE_EQ(box.y1, 50 + 2 * line);
  // Vertical: x is the centre line, the text's length runs down from y.
  spec = {"group", {"rank"}, 100, 50, TextAlign::kStart, true, 12, false};
  box = text_box(spec);
  EXPECT_DOUBLE_EQ(box.x0, 100 - line / 2);
  EXPECT_DOUBLE_EQ(box.y0, 50);
  EXPECT_DOUBLE_EQ(box.y1, 50 + w);
  spec.align = TextAlign::kMiddle;
  EXPECT_DOUBLE_EQ(text_box(spec).y0, 50 - w / 2);
  spec.bold = true;
  EXPECT_GT(text_box(spec).y1 - text_box(spec).y0, w);
  EXPECT_TRUE((TextBox{0, 0, 10, 10}).overlaps(TextBox{9, 9, 20, 20}));
  EXPECT_FALSE((TextBox{0, 0, 10, 10}).overlaps(TextBox{10, 0, 20, 10}));  // touching is not overlapping
}

TEST(SvgText, EmitsBaselinesTspansAndTheRotation) {
  // One line: the baseline 0.95 em below the top.
  EXPECT_EQ(text_svg({"tick", {"15"}, 66, 40, TextAlign::kEnd, false, 12, false}),
            "<text class=\"tick\" x=\"66.0\" y=\"51.4\" text-anchor=\"end\">15</text>\n");
  EXPECT_EQ(text_svg({"group", {"a<b", "c"}, 10, 0, TextAlign::kMiddle, false, 10, true}),
            "<text class=\"group\" font-size=\"10\" font-weight=\"bold\" text-anchor=\"middle\">"
            "<tspan x=\"10.0\" y=\"9.5\">a&lt;b</tspan><tspan x=\"10.0\" y=\"22.0\">c</tspan></text>\n");
  // Vertical, top-aligned: the text ends at the top; the baseline 0.325 em right of the centre line.
  EXPECT_EQ(text_svg({"group", {"255"}, 100, 300, TextAlign::kStart, true, 12, false}),
            "<text class=\"group\" transform=\"rotate(-90 103.9 300.0)\" x=\"103.9\" y=\"300.0\" "
            "text-anchor=\"end\">255</text>\n");
  EXPECT_THROW(text_svg({"group", {"a", "b"}, 0, 0, TextAlign::kStart, true, 12, false}), Error);
  EXPECT_THROW(text_svg({"group", {}, 0, 0, TextAlign::kStart, false, 12, false}), Error);
}

}  // namespace
}  // namespace fulcrum

// A head pattern report (`heads --patterns FILE`, `prefill --patterns FILE`, `profile --heads --patterns`):
// per layer, one attention pattern per q head. Either it is refused with a bad-input Error naming the field,
// or every pattern it holds maps to a valid mask on a small prompt whose every row sees at least itself: a
// report that loads never makes a head that attends to nothing or a mask the kernels refuse.
#include "fuzz_support.hpp"

#include "fulcrum/core/json_reader.hpp"
#include "fulcrum/cost/attention_cost.hpp"
#include "fulcrum/planners/heads/patterns.hpp"

#include <cstddef>
#include <cstdint>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace fulcrum;
  using namespace fulcrum::heads;
  HeadPatternReport report;
  try {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    report = head_patterns_from_json(JsonDocument::parse(text, "fuzz.json", "patterns").root());
  } catch (const Error& e) {
    return fuzz::refused(e);
  }
  constexpr Tokens kPrompt = 256;
  for (std::size_t l = 0; l < report.layers.size() && l < 4; ++l) {
    for (std::size_t h = 0; h < report.layers[l].size() && h < 8; ++h) {
      const MaskSpec mask =
          to_mask(report.layers[l][h], kPrompt, head_mask_seed(7, static_cast<int>(l), static_cast<int>(h)));
      for (const Tokens row : {Tokens{0}, kPrompt / 2, kPrompt - 1}) {
        const Range query{row, row + 1};
        const Tokens seen = attention_pairs(mask, {&query, 1}, {0, kPrompt}, kPrompt);
        FUZZ_CHECK(seen >= 1 && seen <= row + 1, "layer {} head {} row {} sees {} keys", l, h, row, seen);
      }
    }
  }
  return 0;
}

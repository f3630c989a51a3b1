// A mask spec (`--mask`, a plan's masks, Python's Mask). Input: two bytes choosing the document length
// (1 to 160 tokens), four choosing a query and a key range, then the spec's text. A spec is refused with a
// bad-input Error, or it prints back to itself, and on a document it accepts every fast answer agrees with
// the per-pair definition `allows`, counted by brute force: visible rows (or their hull), row bits, pair
// counts, tile kinds and the keys a range of rows needs.
#include "fuzz_support.hpp"

#include "fulcrum/workload/mask.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace {

using fulcrum::MaskSpec;
using fulcrum::Range;
using fulcrum::SmallRanges;
using fulcrum::Tokens;

bool in(const SmallRanges& ranges, Tokens k) {
  return std::any_of(ranges.begin(), ranges.end(), [k](const Range& r) { return k >= r.begin && k < r.end; });
}

Tokens brute_pairs(const MaskSpec& m, Range queries, Range keys, Tokens n) {
  Tokens count = 0;
  for (Tokens q = queries.begin; q < queries.end; ++q) {
    for (Tokens k = keys.begin; k < keys.end; ++k) count += m.allows(q, k, n) ? 1 : 0;
  }
  return count;
}

void check_rows(const MaskSpec& m, Tokens n) {
  for (Tokens q = 0; q < n; ++q) {
    const SmallRanges visible = m.visible(q, n);
    for (Tokens k = 0; k < n; ++k) {
      const bool allowed = m.allows(q, k, n);
      // Hull masks answer a superset; the others exactly.
      FUZZ_CHECK(m.plans_over_hull() ? (!allowed || in(visible, k)) : allowed == in(visible, k),
                 "{}: n {} row {} key {}: allows {} but visible says {}", m.to_string(), n, q, k, allowed,
                 in(visible, k));
    }
    for (Tokens begin = 0; begin < n; begin += 64) {
      const int width = static_cast<int>(std::min<Tokens>(64, n - begin));
      const std::uint64_t bits = m.row_bits(q, begin, width, n);
      for (int j = 0; j < width; ++j) {
        FUZZ_CHECK(((bits >> j) & 1U) == (m.allows(q, begin + j, n) ? 1U : 0U), "{}: n {} row {} key {}: row_bits",
                   m.to_string(), n, q, begin + j);
      }
    }
  }
}

void check_rectangle(const MaskSpec& m, Range queries, Range keys, Tokens n) {
  const Tokens pairs = brute_pairs(m, queries, keys, n);
  FUZZ_CHECK(m.count_pairs(queries, keys, n) == pairs, "{}: n {}: count_pairs [{}, {}) x [{}, {}) = {}, brute {}",
             m.to_string(), n, queries.begin, queries.end, keys.begin, keys.end, m.count_pairs(queries, keys, n),
             pairs);
  const auto kind = m.classify(queries, keys, n);
  const Tokens area = queries.size() * keys.size();
  FUZZ_CHECK(
      (kind == fulcrum::TileKind::kEmpty) == (pairs == 0) && (kind == fulcrum::TileKind::kFull) == (pairs == area),
      "{}: n {}: classify disagrees with {} of {} pairs", m.to_string(), n, pairs, area);
  const SmallRanges needed = m.keys_needed(queries, keys, n);
  for (Tokens k = keys.begin; k < keys.end; ++k) {
    if (brute_pairs(m, queries, {k, k + 1}, n) > 0) {
      FUZZ_CHECK(in(needed, k), "{}: n {}: key {} is seen but not needed", m.to_string(), n, k);
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace fulcrum;
  if (size < 6) return 0;
  const Tokens n = 1 + (data[0] | (data[1] << 8)) % 160;
  const auto cut = [n](std::uint8_t a, std::uint8_t b) {
    const Tokens x = a % (n + 1), y = b % (n + 1);
    return Range{std::min(x, y), std::max(x, y)};
  };
  const Range queries = cut(data[2], data[3]), keys = cut(data[4], data[5]);
  const std::string_view text(reinterpret_cast<const char*>(data + 6), size - 6);
  MaskSpec mask;
  try {
    mask = MaskSpec::parse(text);
  } catch (const Error& e) {
    return fuzz::refused(e);
  }
  const std::string printed = mask.to_string();
  FUZZ_CHECK(MaskSpec::parse(printed) == mask && MaskSpec::parse(printed).to_string() == printed,
             "'{}' prints as '{}', which does not parse back to it", text, printed);
  try {
    mask.check_length(n);
  } catch (const Error& e) {
    return fuzz::refused(e);
  }
  check_rows(mask, n);
  if (!queries.empty() && !keys.empty()) check_rectangle(mask, queries, keys, n);
  return 0;
}

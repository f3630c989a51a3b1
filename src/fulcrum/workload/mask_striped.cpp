// The striped mask: any mask over a document stored in MTraining's block-striped order. Slots of one
// local block hold consecutive original positions, so a slot range is a few runs of consecutive
// positions and every exact answer is the inner mask's answer over runs.
#include "fulcrum/core/error.hpp"
#include "fulcrum/workload/mask_kinds.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <limits>
#include <numeric>

namespace fulcrum {
namespace {

// The permutation of one doc_len-token document: n slots per rank, blocks of `block` tokens.
struct Layout {
  Tokens ranks, block, n;

  Layout(const MaskSpec& m, Tokens doc_len) : ranks(m.ranks), block(m.block), n(doc_len / m.ranks) {
    FULCRUM_CHECK(doc_len % (ranks * block) == 0, "striped mask {}: document length {} is not a multiple of {}",
                  m.to_string(), doc_len, ranks * block);
  }
  // With one rank, or one block per rank, slot order is position order.
  bool identity() const { return ranks == 1 || n == block; }
  Tokens position(Tokens slot) const {
    const Tokens rank = slot / n, local = slot % n;
    return ((local / block) * ranks + rank) * block + local % block;
  }
  Tokens slot(Tokens position) const {
    const Tokens global_block = position / block;
    return (global_block % ranks) * n + (global_block / ranks) * block + position % block;
  }
};

// Slots [slot, slot + positions.size()) hold original positions `positions`.
struct Run {
  Tokens slot;
  Range positions;
};

// `slots` as maximal runs of consecutive slots holding consecutive positions, in slot order. A run
// never crosses a block boundary unless the layout is the identity, so there are at most
// ceil(|slots| / block) + 1 of them.
std::vector<Run> runs_of(const Layout& layout, Range slots) {
  if (slots.empty()) return {};
  if (layout.identity()) return {{slots.begin, slots}};
  std::vector<Run> runs;
  for (Tokens s = slots.begin; s < slots.end;) {
    const Tokens end = std::min(slots.end, (s / layout.block + 1) * layout.block);  // rank starts are block starts
    const Tokens p = layout.position(s);
    if (!runs.empty() && runs.back().positions.end == p) {
      runs.back().positions.end += end - s;
    } else {
      runs.push_back({s, {p, p + end - s}});
    }
    s = end;
  }
  return runs;
}

// The original positions that `slots` hold, as sorted disjoint ranges with adjacent ones merged (a
// whole document is one range, however it is striped).
std::vector<Range> positions_of(const Layout& layout, Range slots) {
  std::vector<Range> ranges;
  for (const auto& run : runs_of(layout, slots)) ranges.push_back(run.positions);
  std::sort(ranges.begin(), ranges.end(), [](Range a, Range b) { return a.begin < b.begin; });
  std::vector<Range> merged;
  for (const Range& r : ranges) {
    if (!merged.empty() && merged.back().end == r.begin) {
      merged.back().end = r.end;
    } else {
      merged.push_back(r);
    }
  }
  return merged;
}

// Σ over query positions of the keys they see, one 64-key word of `inner.row_bits` at a time, keys
// outside `keys` masked off: the cheaper way when both sides are many short runs (small blocks).
Tokens pairs_by_rows(const MaskSpec& inner, const std::vector<Range>& queries, const std::vector<Range>& keys,
                     Tokens doc_len) {
  const Tokens base = keys.front().begin, span = keys.back().end - base;
  std::vector<std::uint64_t> key_words(static_cast<std::size_t>((span + 63) / 64), 0);
  for (const Range& k : keys) {
    for (Tokens w = (k.begin - base) / 64; w * 64 < k.end - base; ++w) {
      key_words[static_cast<std::size_t>(w)] |= mask_detail::range_bits(k, base + w * 64, 64);
    }
  }
  Tokens total = 0;
  for (const Range& q : queries) {
    for (Tokens row = q.begin; row < q.end; ++row) {
      for (std::size_t w = 0; w < key_words.size(); ++w) {
        if (key_words[w] == 0) continue;
        const Tokens begin = base + static_cast<Tokens>(w) * 64;
        const int width = static_cast<int>(std::min<Tokens>(64, base + span - begin));
        total += std::popcount(inner.row_bits(row, begin, width, doc_len) & key_words[w]);
      }
    }
  }
  return total;
}

}  // namespace

MaskSpec MaskSpec::striped(MaskSpec inner, int ranks, Tokens block) {
  if (ranks < 1) fail("mask ranks = {}: must be >= 1", ranks);
  if (block < 1) fail("mask block = {}: must be >= 1", block);
  if (block > std::numeric_limits<Tokens>::max() / 4 / ranks) {
    fail("mask block = {}: ranks x block must be < 2^61 (ranks = {})", block, ranks);
  }
  MaskSpec m;
  m.kind = MaskKind::kStriped;
  m.ranks = ranks;
  m.block = block;
  m.inner = std::make_shared<const MaskSpec>(std::move(inner));
  return m;
}

Tokens MaskSpec::length_multiple() const {
  if (kind != MaskKind::kStriped) return 1;
  return std::lcm(ranks * block, inner->length_multiple());
}

Tokens MaskSpec::source_position(Tokens slot, Tokens doc_len) const {
  if (kind != MaskKind::kStriped) return slot;
  FULCRUM_CHECK(slot >= 0 && slot < doc_len, "slot {} outside a document of {} tokens", slot, doc_len);
  return inner->source_position(Layout(*this, doc_len).position(slot), doc_len);
}

Tokens MaskSpec::slot_of(Tokens position, Tokens doc_len) const {
  if (kind != MaskKind::kStriped) return position;
  FULCRUM_CHECK(position >= 0 && position < doc_len, "position {} outside a document of {} tokens", position, doc_len);
  return Layout(*this, doc_len).slot(inner->slot_of(position, doc_len));
}

namespace mask_detail {

bool striped_allows(const MaskSpec& m, Tokens q, Tokens k, Tokens doc_len) {
  const Layout layout(m, doc_len);
  return m.inner->allows(layout.position(q), layout.position(k), doc_len);
}

std::uint64_t striped_row_bits(const MaskSpec& m, Tokens q, Range tile, Tokens key_begin, Tokens doc_len) {
  const Layout layout(m, doc_len);
  const Tokens row = layout.position(q);
  std::uint64_t bits = 0;
  for (const auto& run : runs_of(layout, tile)) {
    const auto width = static_cast<int>(run.positions.size());  // <= |tile| <= 64
    bits |= m.inner->row_bits(row, run.positions.begin, width, doc_len) << (run.slot - key_begin);
  }
  return bits;
}

Tokens striped_pairs(const MaskSpec& m, Range queries, Range keys, Tokens doc_len) {
  const Layout layout(m, doc_len);
  const auto q_ranges = positions_of(layout, queries);
  const auto k_ranges = positions_of(layout, keys);
  // Inner pair counts over every (query run, key run), or row_bits words over the keys' span per query
  // row: whichever asks the inner mask fewer questions.
  const Tokens by_runs = static_cast<Tokens>(q_ranges.size() * k_ranges.size());
  const Tokens by_rows = queries.size() * ((k_ranges.back().end - k_ranges.front().begin + 63) / 64);
  if (by_rows < by_runs) return pairs_by_rows(*m.inner, q_ranges, k_ranges, doc_len);
  Tokens total = 0;
  for (const Range& q : q_ranges) {
    for (const Range& k : k_ranges) total += m.inner->count_pairs(q, k, doc_len);
  }
  return total;
}

std::string striped_to_string(const MaskSpec& m) {
  return fmt::format("{}:{}:{}:{}", mask_kind_info(m.kind).name, m.ranks, m.block, m.inner->to_string());
}

MaskSpec parse_striped(std::string_view text, const std::vector<std::string_view>& parts) {
  const Tokens ranks = parse_tokens(parts[1], "mask ranks");
  if (ranks < 1 || ranks > std::numeric_limits<int>::max()) {
    fail("mask ranks = {}: must be in [1, {}]", ranks, std::numeric_limits<int>::max());
  }
  const Tokens block = parse_tokens(parts[2], "mask block");
  // The inner mask is everything after the third colon, colons included.
  const std::size_t inner_begin = parts[0].size() + parts[1].size() + parts[2].size() + 3;
  return MaskSpec::striped(MaskSpec::parse(text.substr(inner_begin)), static_cast<int>(ranks), block);
}

}  // namespace mask_detail
}  // namespace fulcrum

// Vertical-slash (MInference / MTraining) and block-sparse masks: index lists behind a shared payload.
// Every query is answered by binary search on the sorted lists, restricted to what a rectangle or a
// row's tile can touch, so the kernel's per-tile `classify` and per-row `row_bits` stay cheap.
#include "fulcrum/core/error.hpp"
#include "fulcrum/core/text.hpp"
#include "fulcrum/workload/mask_kinds.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

namespace fulcrum {
namespace {

template <typename T>
void sort_unique(std::vector<T>& values) {
  std::sort(values.begin(), values.end());
  values.erase(std::unique(values.begin(), values.end()), values.end());
}

std::vector<Tokens> parse_list(std::string_view text, std::string_view field) {
  std::vector<Tokens> values;
  if (text.empty()) return values;
  for (auto item : split_fields(text, ',')) values.push_back(mask_detail::parse_tokens(item, field));
  return values;
}

using BlockPair = std::pair<Tokens, Tokens>;

Range block_range(Tokens block, Tokens index) { return {index * block, (index + 1) * block}; }

// Vertical-slash pairs in a rectangle: columns, plus slashes, minus the pairs that are both.
Tokens vertical_slash_pairs(const MaskIndexLists& l, Range queries, Range keys) {
  const auto& slashes = l.slashes;
  auto count_slashes = [&](Tokens lo, Tokens hi) {  // slashes in [lo, hi)
    if (lo >= hi) return Tokens{0};
    return static_cast<Tokens>(std::lower_bound(slashes.begin(), slashes.end(), hi) -
                               std::lower_bound(slashes.begin(), slashes.end(), lo));
  };
  Tokens total = 0;
  // Column v is seen by rows q >= v; only columns in keys and below queries.end matter.
  const auto v_first = std::lower_bound(l.verticals.begin(), l.verticals.end(), keys.begin);
  const auto v_last = std::lower_bound(v_first, l.verticals.end(), std::min(keys.end, queries.end));
  for (auto it = v_first; it != v_last; ++it) {
    const Tokens first_row = std::max(queries.begin, *it);
    total += queries.end - first_row;
    total -= count_slashes(first_row - *it, queries.end - *it);  // rows whose slash also lands on v
  }
  // Slash s puts key q - s in keys for q in [max(q0, k0 + s), min(q1, k1 + s)): non-empty iff
  // q0 - k1 < s < q1 - k0.
  for (auto it = std::upper_bound(slashes.begin(), slashes.end(), queries.begin - keys.end);
       it != slashes.end() && *it < queries.end - keys.begin; ++it) {
    total += std::min(queries.end, keys.end + *it) - std::max(queries.begin, keys.begin + *it);
  }
  return total;
}

// Block-sparse pairs in a rectangle: visits only listed pairs whose blocks touch it, jumping over the
// rest of the list by binary search.
Tokens block_sparse_pairs(const MaskIndexLists& l, Tokens block, Range queries, Range keys) {
  const auto& pairs = l.block_pairs;
  const Tokens q_last = (queries.end - 1) / block;
  const Tokens k_first = keys.begin / block, k_last = (keys.end - 1) / block;
  Tokens total = 0;
  auto it = std::lower_bound(pairs.begin(), pairs.end(), BlockPair{queries.begin / block, k_first});
  while (it != pairs.end() && it->first <= q_last) {
    if (it->second > std::min(k_last, it->first)) {  // past the rectangle or above the diagonal
      it = std::lower_bound(it, pairs.end(), BlockPair{it->first + 1, k_first});
    } else if (it->second < k_first) {
      it = std::lower_bound(it, pairs.end(), BlockPair{it->first, k_first});
    } else {
      total += mask_detail::band_pairs(intersect(queries, block_range(block, it->first)),
                                       intersect(keys, block_range(block, it->second)), 0);
      ++it;
    }
  }
  return total;
}

}  // namespace

MaskSpec MaskSpec::vertical_slash(std::vector<Tokens> verticals, std::vector<Tokens> slashes) {
  for (Tokens v : verticals) {
    if (v < 0) fail("mask vertical = {}: must be >= 0", v);
  }
  for (Tokens s : slashes) {
    if (s < 0) fail("mask slash = {}: must be >= 0", s);
  }
  sort_unique(verticals);
  sort_unique(slashes);
  auto lists = std::make_shared<MaskIndexLists>();
  lists->verticals = std::move(verticals);
  lists->slashes = std::move(slashes);
  MaskSpec m;
  m.kind = MaskKind::kVerticalSlash;
  m.lists = std::move(lists);
  return m;
}

MaskSpec MaskSpec::block_sparse(Tokens block, std::vector<std::pair<Tokens, Tokens>> pairs) {
  if (block < 1) fail("mask block = {}: must be >= 1", block);
  for (const auto& [q, k] : pairs) {
    if (q < 0) fail("mask query block = {}: must be >= 0", q);
    if (k < 0) fail("mask key block = {}: must be >= 0", k);
  }
  sort_unique(pairs);
  auto lists = std::make_shared<MaskIndexLists>();
  lists->block_pairs = std::move(pairs);
  MaskSpec m;
  m.kind = MaskKind::kBlockSparse;
  m.block = block;
  m.lists = std::move(lists);
  return m;
}

namespace mask_detail {

bool index_allows(const MaskSpec& m, Tokens q, Tokens k) {
  if (k > q) return false;
  const auto& l = *m.lists;
  if (m.kind == MaskKind::kVerticalSlash) {
    return std::binary_search(l.verticals.begin(), l.verticals.end(), k) ||
           std::binary_search(l.slashes.begin(), l.slashes.end(), q - k);
  }
  return std::binary_search(l.block_pairs.begin(), l.block_pairs.end(), BlockPair{q / m.block, k / m.block});
}

std::uint64_t index_row_bits(const MaskSpec& m, Tokens q, Tokens key_begin, Tokens key_end) {
  const auto& l = *m.lists;
  std::uint64_t bits = 0;
  if (m.kind == MaskKind::kVerticalSlash) {
    for (auto it = std::lower_bound(l.verticals.begin(), l.verticals.end(), key_begin);
         it != l.verticals.end() && *it < key_end; ++it) {
      bits |= std::uint64_t{1} << (*it - key_begin);
    }
    // Key q - s lies in [key_begin, key_end) iff s lies in [q - key_end + 1, q - key_begin].
    for (auto it = std::lower_bound(l.slashes.begin(), l.slashes.end(), q - key_end + 1);
         it != l.slashes.end() && *it <= q - key_begin; ++it) {
      bits |= std::uint64_t{1} << (q - *it - key_begin);
    }
    return bits;
  }
  const Tokens q_block = q / m.block, k_last = (key_end - 1) / m.block;
  for (auto it = std::lower_bound(l.block_pairs.begin(), l.block_pairs.end(), BlockPair{q_block, key_begin / m.block});
       it != l.block_pairs.end() && it->first == q_block && it->second <= k_last; ++it) {
    bits |= range_bits(intersect(block_range(m.block, it->second), {key_begin, key_end}), key_begin, 64);
  }
  return bits;
}

Tokens index_pairs(const MaskSpec& m, Range queries, Range keys) {
  if (m.kind == MaskKind::kVerticalSlash) return vertical_slash_pairs(*m.lists, queries, keys);
  return block_sparse_pairs(*m.lists, m.block, queries, keys);
}

std::string index_to_string(const MaskSpec& m) {
  const auto& l = *m.lists;
  if (m.kind == MaskKind::kVerticalSlash) {
    return fmt::format("{}:{}:{}", mask_kind_info(m.kind).name, fmt::join(l.verticals, ","), fmt::join(l.slashes, ","));
  }
  std::string out = fmt::format("{}:{}:", mask_kind_info(m.kind).name, m.block);
  for (std::size_t i = 0; i < l.block_pairs.size(); ++i) {
    out += fmt::format("{}{}-{}", i == 0 ? "" : ",", l.block_pairs[i].first, l.block_pairs[i].second);
  }
  return out;
}

MaskSpec parse_index_mask(const std::vector<std::string_view>& parts) {
  if (parts[0] == mask_kind_info(MaskKind::kVerticalSlash).name) {
    return MaskSpec::vertical_slash(parse_list(parts[1], "mask vertical"), parse_list(parts[2], "mask slash"));
  }
  const Tokens block = parse_tokens(parts[1], "mask block");
  std::vector<BlockPair> pairs;
  if (!parts[2].empty()) {
    for (auto item : split_fields(parts[2], ',')) {
      const auto qk = split_fields(item, '-');
      if (qk.size() != 2) fail("mask block pair = '{}': expected QB-KB, two block indices >= 0", item);
      pairs.emplace_back(parse_tokens(qk[0], "mask query block"), parse_tokens(qk[1], "mask key block"));
    }
  }
  return MaskSpec::block_sparse(block, std::move(pairs));
}

}  // namespace mask_detail
}  // namespace fulcrum

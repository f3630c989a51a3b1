// Vertical-slash (MInference), blockified vertical-slash (MTraining) and block-sparse masks: index lists
// behind a shared payload.
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

// Blockified vertical-slash pairs in a rectangle: for each block offset d, the tiles (qb, qb - d); then
// the vertical columns' rows whose tile is not already one of those. Blocks strictly inside the
// rectangle are whole on both sides, so each offset costs O(1) and each column O(log |D|).
Tokens vertical_slash_blocks_pairs(const MaskIndexLists& l, Tokens block, Range queries, Range keys) {
  const auto& offsets = l.block_offsets;
  auto has_offset = [&](Tokens d) { return std::binary_search(offsets.begin(), offsets.end(), d); };
  auto count_offsets = [&](Tokens lo, Tokens hi) {  // offsets in [lo, hi]
    return static_cast<Tokens>(std::upper_bound(offsets.begin(), offsets.end(), hi) -
                               std::lower_bound(offsets.begin(), offsets.end(), lo));
  };
  const Tokens q_lo = queries.begin / block, q_hi = (queries.end - 1) / block;
  const Tokens k_lo = keys.begin / block, k_hi = (keys.end - 1) / block;
  Tokens total = 0;
  // Offset d touches the rectangle iff some query block qb in [q_lo, q_hi] has qb - d in [k_lo, k_hi].
  for (auto it = std::lower_bound(offsets.begin(), offsets.end(), q_lo - k_hi);
       it != offsets.end() && *it <= q_hi - k_lo; ++it) {
    const Tokens d = *it;
    const Tokens first = std::max(q_lo, k_lo + d), last = std::min(q_hi, k_hi + d);
    auto tile_pairs = [&](Tokens qb) {
      return mask_detail::band_pairs(intersect(queries, block_range(block, qb)),
                                     intersect(keys, block_range(block, qb - d)), 0);
    };
    // Only tiles in an edge row or column of blocks can be cut by the rectangle.
    std::vector<Tokens> edges = {q_lo, q_hi, k_lo + d, k_hi + d};
    std::erase_if(edges, [&](Tokens qb) { return qb < first || qb > last; });
    sort_unique(edges);
    for (Tokens qb : edges) total += tile_pairs(qb);
    const Tokens whole_tile = d == 0 ? block * (block + 1) / 2 : block * block;
    total += (last - first + 1 - static_cast<Tokens>(edges.size())) * whole_tile;
  }
  // Column v is seen by rows [max(q0, v), q1); rows in blocks at an active offset from v's block are
  // counted above already.
  const auto v_first = std::lower_bound(l.verticals.begin(), l.verticals.end(), keys.begin);
  const auto v_last = std::lower_bound(v_first, l.verticals.end(), std::min(keys.end, queries.end));
  for (auto it = v_first; it != v_last; ++it) {
    const Range rows{std::max(queries.begin, *it), queries.end};
    const Tokens v_block = *it / block, r_lo = rows.begin / block, r_hi = (rows.end - 1) / block;
    Tokens covered = count_offsets(r_lo - v_block, r_hi - v_block) * block;
    for (Tokens rb : {r_lo, r_hi}) {  // edge blocks hold fewer than `block` of the rows
      if (has_offset(rb - v_block)) covered += intersect(rows, block_range(block, rb)).size() - block;
      if (r_lo == r_hi) break;
    }
    total += rows.size() - covered;
  }
  return total;
}

}  // namespace

MaskColumns MaskSpec::split_columns(Tokens doc_len) const {
  if (kind == MaskKind::kStriped) {  // the inner mask's columns, moved to the slots that hold them
    MaskColumns in = inner->split_columns(doc_len);
    if (in.columns.empty()) return {*this, {}};
    MaskColumns out{striped(std::move(in.rest), ranks, block), {}};
    out.columns.reserve(in.columns.size());
    for (Tokens c : in.columns) out.columns.push_back(slot_of(inner->source_position(c, doc_len), doc_len));
    return out;
  }
  if ((kind != MaskKind::kVerticalSlash && kind != MaskKind::kVerticalSlashBlocks) || lists->verticals.empty()) {
    return {*this, {}};
  }
  const auto& v = lists->verticals;
  MaskColumns out{kind == MaskKind::kVerticalSlash ? vertical_slash({}, lists->slashes)
                                                   : vertical_slash_blocks(block, {}, lists->block_offsets),
                  {v.begin(), std::lower_bound(v.begin(), v.end(), doc_len)}};
  return out;
}

MaskSpec MaskSpec::vertical_slash_blocks(Tokens block, std::vector<Tokens> verticals,
                                         std::vector<Tokens> block_offsets) {
  mask_detail::check_mask_value("mask block", block, 1);
  for (Tokens v : verticals) mask_detail::check_mask_value("mask vertical", v, 0);
  for (Tokens d : block_offsets) mask_detail::check_mask_value("mask block offset", d, 0);
  sort_unique(verticals);
  sort_unique(block_offsets);
  auto lists = std::make_shared<MaskIndexLists>();
  lists->verticals = std::move(verticals);
  lists->block_offsets = std::move(block_offsets);
  MaskSpec m;
  m.kind = MaskKind::kVerticalSlashBlocks;
  m.block = block;
  m.lists = std::move(lists);
  return m;
}

MaskSpec MaskSpec::vertical_slash(std::vector<Tokens> verticals, std::vector<Tokens> slashes) {
  for (Tokens v : verticals) mask_detail::check_mask_value("mask vertical", v, 0);
  for (Tokens s : slashes) mask_detail::check_mask_value("mask slash", s, 0);
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
  mask_detail::check_mask_value("mask block", block, 1);
  for (const auto& [q, k] : pairs) {
    mask_detail::check_mask_value("mask query block", q, 0);
    mask_detail::check_mask_value("mask key block", k, 0);
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
  if (m.kind == MaskKind::kVerticalSlashBlocks) {
    return std::binary_search(l.verticals.begin(), l.verticals.end(), k) ||
           std::binary_search(l.block_offsets.begin(), l.block_offsets.end(), q / m.block - k / m.block);
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
  if (m.kind == MaskKind::kVerticalSlashBlocks) {
    for (auto it = std::lower_bound(l.verticals.begin(), l.verticals.end(), key_begin);
         it != l.verticals.end() && *it < key_end; ++it) {
      bits |= std::uint64_t{1} << (*it - key_begin);
    }
    // Key block q_block - d lies in [key_begin / block, k_last] iff d lies in [q_block - k_last, ...].
    for (auto it = std::lower_bound(l.block_offsets.begin(), l.block_offsets.end(), q_block - k_last);
         it != l.block_offsets.end() && *it <= q_block - key_begin / m.block; ++it) {
      bits |= range_bits(intersect(block_range(m.block, q_block - *it), {key_begin, key_end}), key_begin, 64);
    }
    return bits;
  }
  for (auto it = std::lower_bound(l.block_pairs.begin(), l.block_pairs.end(), BlockPair{q_block, key_begin / m.block});
       it != l.block_pairs.end() && it->first == q_block && it->second <= k_last; ++it) {
    bits |= range_bits(intersect(block_range(m.block, it->second), {key_begin, key_end}), key_begin, 64);
  }
  return bits;
}

Tokens index_pairs(const MaskSpec& m, Range queries, Range keys) {
  if (m.kind == MaskKind::kVerticalSlash) return vertical_slash_pairs(*m.lists, queries, keys);
  if (m.kind == MaskKind::kVerticalSlashBlocks) return vertical_slash_blocks_pairs(*m.lists, m.block, queries, keys);
  return block_sparse_pairs(*m.lists, m.block, queries, keys);
}

std::string index_to_string(const MaskSpec& m) {
  const auto& l = *m.lists;
  if (m.kind == MaskKind::kVerticalSlash) {
    return fmt::format("{}:{}:{}", mask_kind_info(m.kind).name, fmt::join(l.verticals, ","), fmt::join(l.slashes, ","));
  }
  if (m.kind == MaskKind::kVerticalSlashBlocks) {
    return fmt::format("{}:{}:{}:{}", mask_kind_info(m.kind).name, m.block, fmt::join(l.verticals, ","),
                       fmt::join(l.block_offsets, ","));
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
  if (parts[0] == mask_kind_info(MaskKind::kVerticalSlashBlocks).name) {
    return MaskSpec::vertical_slash_blocks(parse_tokens(parts[1], "mask block"), parse_list(parts[2], "mask vertical"),
                                           parse_list(parts[3], "mask block offset"));
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

#include "fulcrum/workload/head_masks.hpp"

#include "fulcrum/core/error.hpp"

namespace fulcrum {

std::vector<MaskRun> mask_runs(const MaskSpec& mask, std::span<const MaskSpec> head_masks, HeadRange heads) {
  if (head_masks.empty()) return {{heads, &mask}};
  const int q_heads = static_cast<int>(head_masks.size());
  std::vector<MaskRun> runs;
  for (int h = heads.first(); h < heads.last(q_heads); ++h) {
    const MaskSpec& m = head_masks[static_cast<std::size_t>(h)];
    if (!runs.empty() && (runs.back().mask == &m || *runs.back().mask == m)) {
      ++runs.back().heads.end;
    } else {
      runs.push_back({{h, h + 1}, &m});
    }
  }
  return runs;
}

std::vector<Range> keys_needed(std::span<const MaskRun> runs, Range queries, Range keys, Tokens doc_len) {
  if (runs.size() == 1) return runs.front().mask->keys_needed(queries, keys, doc_len).to_vector();
  RangeSet all;
  for (const auto& run : runs) {
    for (const auto& r : run.mask->keys_needed(queries, keys, doc_len)) all.add(r);
  }
  return all.ranges();
}

void validate_head_masks(std::span<const MaskSpec> head_masks, int q_heads, std::string_view field) {
  if (!head_masks.empty() && static_cast<int>(head_masks.size()) != q_heads) {
    fail("{} has {} masks: must be empty (one mask for every head) or one per q head ({})", field, head_masks.size(),
         q_heads);
  }
}

void check_mask_reach(const MaskSpec& mask, Tokens longest, std::string_view field) {
  if (!mask.is_index_list() || !mask.lists) return;
  const auto& l = *mask.lists;
  auto past = [&](std::string_view what, Tokens value, Tokens position) {
    if (position >= longest) {
      fail("{} {} = {}: past the sequence (the longest document has {} tokens)", field, what, value, longest);
    }
  };
  if (!l.verticals.empty()) past("vertical", l.verticals.back(), l.verticals.back());
  if (!l.slashes.empty()) past("slash", l.slashes.back(), l.slashes.back());
  if (!l.block_offsets.empty()) past("block offset", l.block_offsets.back(), l.block_offsets.back() * mask.block);
  for (const auto& [qb, kb] : l.block_pairs) past("block", std::max(qb, kb), std::max(qb, kb) * mask.block);
}

void check_mask_lengths(const MaskSpec& mask, std::span<const MaskSpec> head_masks, Tokens doc_len,
                        std::string_view field) {
  mask.check_length(doc_len, field);
  for (std::size_t h = 0; h < head_masks.size(); ++h) {
    head_masks[h].check_length(doc_len, fmt::format("{}.head_masks[{}]", field, h));
  }
}

void validate_head_range(HeadRange heads, int q_heads, std::string_view field) {
  if (heads.all()) {
    if (heads.begin != 0) fail("{} = [{}, all): an all-heads range must begin at 0", field, heads.begin);
    return;
  }
  if (heads.begin < 0 || heads.begin >= heads.end || heads.end > q_heads) {
    fail("{} = [{}, {}): must satisfy 0 <= begin < end <= q_heads = {}", field, heads.begin, heads.end, q_heads);
  }
}

}  // namespace fulcrum

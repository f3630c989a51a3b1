// Masks per q head. A document has one MaskSpec for every head, or one per head (heterogeneous
// heads: MTraining's per-head sparse patterns, what FlexAttn balances). Work over a head range is
// then a few runs of consecutive heads that share a mask; callers count pairs and needed keys per run.
#pragma once

#include "fulcrum/core/interval.hpp"
#include "fulcrum/workload/mask.hpp"

#include <span>
#include <string_view>
#include <vector>

namespace fulcrum {

/// Consecutive q heads `heads` (explicit, or all when the document has one mask) that share `mask`.
struct MaskRun {
  HeadRange heads;
  const MaskSpec* mask = nullptr;
};

/// The runs of heads `heads` under `mask`, or under `head_masks` (one per q head) when it is not
/// empty. One mask gives one run {heads, &mask}, so all-head work over one mask is one run as before.
/// The spans must outlive the runs.
std::vector<MaskRun> mask_runs(const MaskSpec& mask, std::span<const MaskSpec> head_masks, HeadRange heads);
/// Runs point at `mask`: a temporary would leave them dangling.
std::vector<MaskRun> mask_runs(const MaskSpec&& mask, std::span<const MaskSpec> head_masks, HeadRange heads) = delete;

/// Keys of `keys` that rows `queries` need under any run's mask (sorted, disjoint).
std::vector<Range> keys_needed(std::span<const MaskRun> runs, Range queries, Range keys, Tokens doc_len);

/// Checks a per-head mask list against the model: empty or exactly q_heads masks.
/// `field` names it in the error, e.g. "documents[3].head_masks".
void validate_head_masks(std::span<const MaskSpec> head_masks, int q_heads, std::string_view field);

/// Checks that a document of doc_len tokens suits `mask` and every mask of `head_masks`
/// (MaskSpec::check_length: striped masks need multiples of ranks x block). `field` names the document,
/// e.g. "documents[3]"; a head mask's error names "<field>.head_masks[h]".
/// Bad input when an index-list mask (vslash, vsblocks, blocksparse) names a column, offset or block that
/// lies past every document of the batch (`longest` tokens): a static pattern written for longer sequences,
/// which would otherwise silently mean less than it says. `field` names it, e.g. "mask".
void check_mask_reach(const MaskSpec& mask, Tokens longest, std::string_view field);

void check_mask_lengths(const MaskSpec& mask, std::span<const MaskSpec> head_masks, Tokens doc_len,
                        std::string_view field);

/// Checks a head range against the model: all, or 0 <= begin < end <= q_heads.
void validate_head_range(HeadRange heads, int q_heads, std::string_view field);

}  // namespace fulcrum

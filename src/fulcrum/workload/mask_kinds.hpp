// Internal to workload/: the arithmetic MaskSpec's methods dispatch to, one file per family.
//  mask.cpp          the simple bands (causal, full, window, lambda), parsing, dispatch
//  mask_blocks.cpp   causal-blockwise and shared-question: bands whose clip ranges change per block
//  mask_index.cpp    vertical-slash, vsblocks and block-sparse: index lists behind a shared payload
//  mask_striped.cpp  striped: another mask over a block-striped permutation of the document
// Every function here takes `queries`/`keys` already clipped to [0, doc_len) and non-empty unless it
// says otherwise.
#pragma once

#include "fulcrum/workload/mask.hpp"

#include <cstdint>
#include <string_view>
#include <vector>

namespace fulcrum::mask_detail {

/// #{(q, k) : q in queries, k in keys, k <= q + c}; any ranges (empty gives 0).
Tokens band_pairs(Range queries, Range keys, Tokens c);
/// Parses a whole decimal integer; errors name `field`.
Tokens parse_tokens(std::string_view text, std::string_view field);
/// A mask's number (window, block, offset, vertical, ...) from a factory: in [min, the largest supported
/// document], which also keeps the masks' pair arithmetic (products of two such values) inside 64 bits.
void check_mask_value(std::string_view field, Tokens value, Tokens min);
/// The bits of a width-bit word (bit j = key key_begin + j) that fall in `keys`.
inline std::uint64_t range_bits(Range keys, Tokens key_begin, int width) {
  const Tokens lo = std::max(keys.begin, key_begin) - key_begin;
  const Tokens hi = std::min(keys.end, key_begin + width) - key_begin;
  if (hi <= lo) return 0;
  const std::uint64_t below_hi = hi >= 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << hi) - 1;
  return below_hi & ~((std::uint64_t{1} << lo) - 1);  // lo < hi <= 64, so lo < 64
}

// Causal-blockwise and shared-question (mask_blocks.cpp).
bool blockwise_allows(const MaskSpec& m, Tokens q, Tokens k, Tokens doc_len);
SmallRanges blockwise_visible(const MaskSpec& m, Tokens q, Tokens doc_len);
Tokens blockwise_pairs(const MaskSpec& m, Range queries, Range keys, Tokens doc_len);
SmallRanges blockwise_keys_needed(const MaskSpec& m, Range queries, Range keys, Tokens doc_len);
void blockwise_shape_rows(const MaskSpec& m, Tokens doc_len, std::vector<Tokens>& rows);

bool shared_question_allows(const MaskSpec& m, Tokens q, Tokens k, Tokens doc_len);
SmallRanges shared_question_visible(const MaskSpec& m, Tokens q, Tokens doc_len);
Tokens shared_question_pairs(const MaskSpec& m, Range queries, Range keys, Tokens doc_len);
SmallRanges shared_question_keys_needed(const MaskSpec& m, Range queries, Range keys, Tokens doc_len);
void shared_question_shape_rows(const MaskSpec& m, Tokens doc_len, std::vector<Tokens>& rows);

// Vertical-slash, vsblocks and block-sparse (mask_index.cpp). `q`, `k` in [0, doc_len).
bool index_allows(const MaskSpec& m, Tokens q, Tokens k);
/// Row q's bits for keys [key_begin, key_end) with key_end <= min(q + 1, doc_len), key_begin <= key_end.
std::uint64_t index_row_bits(const MaskSpec& m, Tokens q, Tokens key_begin, Tokens key_end);
Tokens index_pairs(const MaskSpec& m, Range queries, Range keys);
std::string index_to_string(const MaskSpec& m);
/// "vslash", "vsblocks" or "blocksparse" with its fields; fails naming the field.
MaskSpec parse_index_mask(const std::vector<std::string_view>& parts);

// Striped (mask_striped.cpp). `q`, `k` in [0, doc_len), doc_len a multiple of ranks x block.
bool striped_allows(const MaskSpec& m, Tokens q, Tokens k, Tokens doc_len);
/// Row q's bits for the keys of `tile` (non-empty, within 64 keys of key_begin), bit j = key_begin + j.
std::uint64_t striped_row_bits(const MaskSpec& m, Tokens q, Range tile, Tokens key_begin, Tokens doc_len);
Tokens striped_pairs(const MaskSpec& m, Range queries, Range keys, Tokens doc_len);
std::string striped_to_string(const MaskSpec& m);
/// "striped:W:G:INNER" split at ':' into `parts` (at least four); INNER is the rest of `text`.
MaskSpec parse_striped(std::string_view text, const std::vector<std::string_view>& parts);

}  // namespace fulcrum::mask_detail

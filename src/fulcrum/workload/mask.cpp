#include "fulcrum/workload/mask.hpp"

#include "fulcrum/core/error.hpp"
#include "fulcrum/core/text.hpp"
#include "fulcrum/workload/limits.hpp"
#include "fulcrum/workload/mask_kinds.hpp"

#include <fmt/format.h>

#include <charconv>

namespace fulcrum {
namespace mask_detail {
namespace {

// Σ_{x=0}^{n-1} clamp(x, 0, width): the pairs of a band whose per-row count grows by one per row.
Tokens clamped_prefix_sum(Tokens n, Tokens width) {
  if (n <= 0) return 0;
  if (n <= width + 1) return n * (n - 1) / 2;
  return width * (width + 1) / 2 + (n - width - 1) * width;
}

}  // namespace

Tokens band_pairs(Range queries, Range keys, Tokens c) {
  if (queries.empty() || keys.empty()) return 0;
  // Row q sees clamp(q + c + 1 - keys.begin, 0, |keys|) keys; sum over the query rows.
  const Tokens width = keys.size();
  const Tokens x0 = queries.begin + c + 1 - keys.begin;
  const Tokens x1 = queries.end + c + 1 - keys.begin;
  return clamped_prefix_sum(x1, width) - clamped_prefix_sum(x0, width);
}

Tokens parse_tokens(std::string_view text, std::string_view field) {
  Tokens value = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || ptr != text.data() + text.size()) {
    fail("{} = '{}': not an integer", field, text);
  }
  // No offset, window or block means anything beyond the largest document, and the bound keeps the masks'
  // pair arithmetic (products of two such values) inside 64 bits.
  if (value < -kMaxDocumentTokens || value > kMaxDocumentTokens) {
    fail("{} = {}: must be in [-{}, {}] (the largest supported document)", field, value, kMaxDocumentTokens,
         kMaxDocumentTokens);
  }
  return value;
}

}  // namespace mask_detail

using mask_detail::band_pairs;

namespace {

constexpr MaskKindInfo kMaskKinds[] = {
    {MaskKind::kCausal, "causal", "causal", "causal"},
    {MaskKind::kFull, "full", "full", "full"},
    {MaskKind::kSlidingWindow, "window", "window:W", "window:5"},
    {MaskKind::kLambda, "lambda", "lambda:SINK:WINDOW", "lambda:2:4"},
    {MaskKind::kCausalBlockwise, "blockwise", "blockwise:B:W", "blockwise:3:1"},
    {MaskKind::kSharedQuestion, "shared-question", "shared-question:A:P", "shared-question:3:25"},
    {MaskKind::kVerticalSlash, "vslash", "vslash:V1,V2,..:S1,S2,..", "vslash:0,7:0,2"},
    {MaskKind::kBlockSparse, "blocksparse", "blocksparse:B:QB-KB,..", "blocksparse:4:0-0,1-0,2-1,2-2,4-4"},
    {MaskKind::kVerticalSlashBlocks, "vsblocks", "vsblocks:G:V1,V2,..:D1,D2,..", "vsblocks:4:0,9:0,2"},
    // One rank and one-token blocks: valid for documents of any length (striped lengths must be
    // multiples of ranks x block), its permutation the identity.
    {MaskKind::kStriped, "striped", "striped:W:G:INNER", "striped:1:1:vsblocks:2:5:0,3"},
};

constexpr bool rows_in_declaration_order() {
  for (std::size_t i = 0; i < std::size(kMaskKinds); ++i) {
    if (static_cast<std::size_t>(kMaskKinds[i].kind) != i) return false;
  }
  return true;
}
static_assert(rows_in_declaration_order(), "kMaskKinds: one row per MaskKind, in declaration order");

}  // namespace

std::span<const MaskKindInfo> mask_kind_table() { return kMaskKinds; }

const MaskKindInfo& mask_kind_info(MaskKind kind) {
  const auto i = static_cast<std::size_t>(kind);
  FULCRUM_CHECK(i < std::size(kMaskKinds), "mask kind {} has no row in the mask table", i);
  return kMaskKinds[i];
}

std::string mask_syntax_list(std::string_view separator) {
  std::string out;
  for (const auto& row : kMaskKinds) {
    if (!out.empty()) out += separator;
    out += row.syntax;
  }
  return out;
}

std::vector<MaskKind> all_mask_kinds() {
  std::vector<MaskKind> kinds;
  for (const auto& row : kMaskKinds) kinds.push_back(row.kind);
  return kinds;
}

MaskSpec MaskSpec::sliding_window(Tokens window) {
  if (window < 1) fail("mask window = {}: must be >= 1", window);
  MaskSpec m;
  m.kind = MaskKind::kSlidingWindow;
  m.window = window;
  return m;
}

MaskSpec MaskSpec::lambda(Tokens sink, Tokens window) {
  if (sink < 0) fail("mask sink = {}: must be >= 0", sink);
  if (window < 1) fail("mask window = {}: must be >= 1", window);
  MaskSpec m;
  m.kind = MaskKind::kLambda;
  m.window = window;
  m.sink = sink;
  return m;
}

MaskSpec MaskSpec::causal_blockwise(Tokens block, Tokens window_blocks) {
  if (block < 1) fail("mask block = {}: must be >= 1", block);
  if (window_blocks < 0) fail("mask window blocks = {}: must be >= 0", window_blocks);
  MaskSpec m;
  m.kind = MaskKind::kCausalBlockwise;
  m.block = block;
  m.window_blocks = window_blocks;
  return m;
}

MaskSpec MaskSpec::shared_question(Tokens answers, Tokens question_percent) {
  if (answers < 1) fail("mask answers = {}: must be >= 1", answers);
  if (question_percent < 1 || question_percent > 99) {
    fail("mask question percent = {}: must be in [1, 99]", question_percent);
  }
  MaskSpec m;
  m.kind = MaskKind::kSharedQuestion;
  m.answers = answers;
  m.question_percent = question_percent;
  return m;
}

MaskSpec MaskSpec::parse(std::string_view text) {
  using mask_detail::parse_tokens;
  const auto parts = split_fields(text, ':');
  const MaskKindInfo* row = nullptr;
  for (const auto& r : kMaskKinds) {
    if (parts[0] == r.name) row = &r;
  }
  // The inner mask of striped is its last field and may hold colons of its own.
  if (row != nullptr && row->kind == MaskKind::kStriped && parts.size() >= 4) {
    return mask_detail::parse_striped(text, parts);
  }
  // Fields after the name: as many as the syntax has.
  if (row != nullptr && parts.size() == split_fields(row->syntax, ':').size()) {
    switch (row->kind) {
      case MaskKind::kCausal: return causal();
      case MaskKind::kFull: return full();
      case MaskKind::kSlidingWindow: return sliding_window(parse_tokens(parts[1], "mask window"));
      case MaskKind::kLambda: return lambda(parse_tokens(parts[1], "mask sink"), parse_tokens(parts[2], "mask window"));
      case MaskKind::kCausalBlockwise:
        return causal_blockwise(parse_tokens(parts[1], "mask block"), parse_tokens(parts[2], "mask window blocks"));
      case MaskKind::kSharedQuestion:
        return shared_question(parse_tokens(parts[1], "mask answers"), parse_tokens(parts[2], "mask question percent"));
      case MaskKind::kVerticalSlash:
      case MaskKind::kBlockSparse:
      case MaskKind::kVerticalSlashBlocks: return mask_detail::parse_index_mask(parts);
      case MaskKind::kStriped: break;  // parsed above
    }
  }
  fail("mask = '{}': expected {}", text, mask_syntax_list(", "));
}

std::string MaskSpec::to_string() const {
  const std::string_view name = mask_kind_info(kind).name;
  switch (kind) {
    case MaskKind::kCausal:
    case MaskKind::kFull: return std::string(name);
    case MaskKind::kSlidingWindow: return fmt::format("{}:{}", name, window);
    case MaskKind::kLambda: return fmt::format("{}:{}:{}", name, sink, window);
    case MaskKind::kCausalBlockwise: return fmt::format("{}:{}:{}", name, block, window_blocks);
    case MaskKind::kSharedQuestion: return fmt::format("{}:{}:{}", name, answers, question_percent);
    case MaskKind::kVerticalSlash:
    case MaskKind::kBlockSparse:
    case MaskKind::kVerticalSlashBlocks: return mask_detail::index_to_string(*this);
    case MaskKind::kStriped: return mask_detail::striped_to_string(*this);
  }
  return "?";
}

bool operator==(const MaskSpec& a, const MaskSpec& b) {
  const bool same_lists = a.lists == b.lists || (a.lists && b.lists && *a.lists == *b.lists);
  const bool same_inner = a.inner == b.inner || (a.inner && b.inner && *a.inner == *b.inner);
  return a.kind == b.kind && a.window == b.window && a.sink == b.sink && a.block == b.block &&
         a.window_blocks == b.window_blocks && a.answers == b.answers && a.question_percent == b.question_percent &&
         a.ranks == b.ranks && same_lists && same_inner;
}

bool MaskSpec::allows(Tokens q, Tokens k, Tokens doc_len) const {
  if (q < 0 || k < 0 || q >= doc_len || k >= doc_len) return false;
  switch (kind) {
    case MaskKind::kFull: return true;
    case MaskKind::kCausal: return k <= q;
    case MaskKind::kSlidingWindow: return k <= q && k > q - window;
    case MaskKind::kLambda: return k <= q && (k < sink || k > q - window);
    case MaskKind::kCausalBlockwise: return mask_detail::blockwise_allows(*this, q, k, doc_len);
    case MaskKind::kSharedQuestion: return mask_detail::shared_question_allows(*this, q, k, doc_len);
    case MaskKind::kVerticalSlash:
    case MaskKind::kBlockSparse:
    case MaskKind::kVerticalSlashBlocks: return mask_detail::index_allows(*this, q, k);
    case MaskKind::kStriped: return mask_detail::striped_allows(*this, q, k, doc_len);
  }
  return false;
}

std::uint64_t MaskSpec::row_bits(Tokens q, Tokens key_begin, int width, Tokens doc_len) const {
  FULCRUM_CHECK(width >= 1 && width <= 64, "row_bits width = {}: must be in [1, 64]", width);
  if (q < 0 || q >= doc_len) return 0;
  const Range tile = intersect({key_begin, key_begin + width}, {0, doc_len});
  if (tile.empty()) return 0;
  if (is_index_list()) {
    const Range keys = intersect(tile, {0, q + 1});  // index masks are inside the causal hull
    if (keys.empty()) return 0;
    return mask_detail::index_row_bits(*this, q, keys.begin, keys.end) << (keys.begin - key_begin);
  }
  if (kind == MaskKind::kStriped) return mask_detail::striped_row_bits(*this, q, tile, key_begin, doc_len);
  std::uint64_t bits = 0;
  for (const auto& r : visible(q, doc_len)) bits |= mask_detail::range_bits(intersect(r, tile), key_begin, width);
  return bits;
}

SmallRanges MaskSpec::visible(Tokens q, Tokens doc_len) const {
  switch (kind) {
    case MaskKind::kFull:
    case MaskKind::kStriped: return {{0, doc_len}};
    case MaskKind::kCausal:
    case MaskKind::kVerticalSlash:
    case MaskKind::kBlockSparse:
    case MaskKind::kVerticalSlashBlocks: return {{0, q + 1}};
    case MaskKind::kSlidingWindow: return {{std::max<Tokens>(0, q - window + 1), q + 1}};
    case MaskKind::kLambda: {
      const Tokens window_begin = std::max<Tokens>(0, q - window + 1);
      const Tokens sink_end = std::min(sink, q + 1);
      if (sink_end >= window_begin) return {{0, q + 1}};
      if (sink_end == 0) return {{window_begin, q + 1}};
      return {{0, sink_end}, {window_begin, q + 1}};
    }
    case MaskKind::kCausalBlockwise: return mask_detail::blockwise_visible(*this, q, doc_len);
    case MaskKind::kSharedQuestion: return mask_detail::shared_question_visible(*this, q, doc_len);
  }
  return {};
}

void MaskSpec::check_length(Tokens doc_len, std::string_view where) const {
  const std::string_view colon = where.empty() ? "" : ": ";
  // Beyond it a document's pair count (up to doc_len^2) would not be exact in 64 bits.
  if (doc_len > kMaxDocumentTokens) {
    fail("{}{}document length = {}: must be <= {} (the largest supported document)", where, colon, doc_len,
         kMaxDocumentTokens);
  }
  if (kind != MaskKind::kStriped) return;
  if (doc_len % (ranks * block) != 0) {
    fail("{}{}mask striped = '{}': document length = {} must be a multiple of ranks x block = {} x {} = {}", where,
         colon, to_string(), doc_len, ranks, block, ranks * block);
  }
  inner->check_length(doc_len, where);
}

Tokens MaskSpec::count_pairs(Range queries, Range keys, Tokens doc_len) const {
  queries = intersect(queries, {0, doc_len});
  keys = intersect(keys, {0, doc_len});
  if (queries.empty() || keys.empty()) return 0;
  switch (kind) {
    case MaskKind::kFull: return queries.size() * keys.size();
    case MaskKind::kCausal: return band_pairs(queries, keys, 0);
    case MaskKind::kSlidingWindow: return band_pairs(queries, keys, 0) - band_pairs(queries, keys, -window);
    case MaskKind::kLambda:
      // Window pairs, plus sink keys the window no longer covers (k < sink and k <= q - window).
      return band_pairs(queries, keys, 0) - band_pairs(queries, keys, -window) +
             band_pairs(queries, intersect(keys, {0, sink}), -window);
    case MaskKind::kCausalBlockwise: return mask_detail::blockwise_pairs(*this, queries, keys, doc_len);
    case MaskKind::kSharedQuestion: return mask_detail::shared_question_pairs(*this, queries, keys, doc_len);
    case MaskKind::kVerticalSlash:
    case MaskKind::kBlockSparse:
    case MaskKind::kVerticalSlashBlocks: return mask_detail::index_pairs(*this, queries, keys);
    case MaskKind::kStriped: return mask_detail::striped_pairs(*this, queries, keys, doc_len);
  }
  return 0;
}

SmallRanges MaskSpec::keys_needed(Range queries, Range keys, Tokens doc_len) const {
  queries = intersect(queries, {0, doc_len});
  keys = intersect(keys, {0, doc_len});
  if (queries.empty() || keys.empty()) return {};
  if (kind == MaskKind::kCausalBlockwise) return mask_detail::blockwise_keys_needed(*this, queries, keys, doc_len);
  if (kind == MaskKind::kSharedQuestion) {
    return mask_detail::shared_question_keys_needed(*this, queries, keys, doc_len);
  }
  // The other kinds' visible-range endpoints never decrease with q, so the union over the rows is the
  // first row's set, the last row's set, and everything the moving (last) range sweeps between them.
  const auto first = visible(queries.begin, doc_len);
  const auto last = visible(queries.end - 1, doc_len);
  SmallRanges needed;
  needed.push(intersect(first[0], keys));
  needed.push(intersect({first.back().begin, last.back().end}, keys));
  if (last.size() == 2) needed.push(intersect(last[0], keys));
  needed.normalize();
  return needed;
}

TileKind MaskSpec::classify(Range queries, Range keys, Tokens doc_len) const {
  const Tokens pairs = count_pairs(queries, keys, doc_len);
  if (pairs == 0) return TileKind::kEmpty;
  if (pairs == intersect(queries, {0, doc_len}).size() * intersect(keys, {0, doc_len}).size()) {
    return TileKind::kFull;
  }
  return TileKind::kPartial;
}

std::vector<Tokens> MaskSpec::row_breakpoints(const std::vector<Tokens>& key_edges, Tokens doc_len) const {
  std::vector<Tokens> offsets;  // the c of every band k <= q + c this mask is built from
  std::vector<Tokens> edges = key_edges;
  std::vector<Tokens> rows;
  switch (kind) {
    case MaskKind::kFull:
    case MaskKind::kStriped: break;  // its hull is the full square
    case MaskKind::kCausal:
    case MaskKind::kVerticalSlash:
    case MaskKind::kBlockSparse:
    case MaskKind::kVerticalSlashBlocks: offsets = {0}; break;
    case MaskKind::kSlidingWindow: offsets = {0, -window}; break;
    case MaskKind::kLambda:
      offsets = {0, -window};
      edges.push_back(sink);
      break;
    case MaskKind::kCausalBlockwise:
      // Only the band k <= q moves; the other endpoints are constant within a block.
      offsets = {0};
      mask_detail::blockwise_shape_rows(*this, doc_len, rows);
      break;
    case MaskKind::kSharedQuestion:
      offsets = {0};
      mask_detail::shared_question_shape_rows(*this, doc_len, rows);
      break;
  }
  for (Tokens c : offsets) {
    for (Tokens k : edges) {
      // Row q's band edge q + c + 1 passes key edge k between rows k - c - 1 and k - c.
      for (Tokens q : {k - c - 1, k - c}) {
        if (q >= 0 && q <= doc_len) rows.push_back(q);
      }
    }
  }
  return rows;
}

}  // namespace fulcrum

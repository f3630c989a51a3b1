#include "fulcrum/workload/batch.hpp"

#include "fulcrum/core/error.hpp"
#include "fulcrum/workload/head_masks.hpp"
#include "fulcrum/workload/limits.hpp"

#include <algorithm>

namespace fulcrum {

namespace {

// Whether every row of `mask` sees only keys at or before itself (its visible set lies in the causal one). The
// switch has no default: a new kind does not compile until it says (-Wswitch is an error).
bool sees_only_earlier_keys(const MaskSpec& mask) {
  switch (mask.kind) {
    case MaskKind::kCausal:
    case MaskKind::kSlidingWindow:
    case MaskKind::kLambda:
    case MaskKind::kCausalBlockwise:
    case MaskKind::kSharedQuestion:
    case MaskKind::kVerticalSlash:
    case MaskKind::kBlockSparse:
    case MaskKind::kVerticalSlashBlocks: return true;
    case MaskKind::kFull:
    case MaskKind::kStriped: return false;
  }
  return false;
}

}  // namespace

const MaskSpec& Document::planning_mask() const {
  if (head_masks.empty()) return mask;
  // Planned over the whole square (full, striped), `mask` holds any head; planned over the causal hull (causal,
  // index-list masks), it holds every head that sees only earlier keys. Cheap: called in planners' inner loops.
  const bool square = mask.kind == MaskKind::kFull || mask.kind == MaskKind::kStriped;
  if (square) return mask;
  static const MaskSpec causal = MaskSpec::causal();
  static const MaskSpec full = MaskSpec::full();
  if (!std::all_of(head_masks.begin(), head_masks.end(), sees_only_earlier_keys)) return full;
  return mask.kind == MaskKind::kCausal || mask.is_index_list() ? mask : causal;
}
namespace {

struct SegmentDocOrder {
  bool operator()(const Segment& s, int d) const { return s.doc < d; }
  bool operator()(int d, const Segment& s) const { return d < s.doc; }
};

}  // namespace

Tokens Batch::total_tokens() const {
  Tokens total = 0;
  for (const auto& d : documents) total += d.length;
  return total;
}

std::span<const Segment> Batch::segments_of(int doc) const {
  const auto [first, last] = std::equal_range(segments.begin(), segments.end(), doc, SegmentDocOrder{});
  return {first, last};
}

std::span<const Segment> Batch::segments_overlapping(int doc, Range tokens) const {
  const auto all = segments_of(doc);
  const auto first =
      std::partition_point(all.begin(), all.end(), [&](const Segment& s) { return s.tokens.end <= tokens.begin; });
  const auto last =
      std::partition_point(first, all.end(), [&](const Segment& s) { return s.tokens.begin < tokens.end; });
  return {first, last};
}

void validate_batch_shape(int ranks, Tokens tokens_per_rank) {
  if (ranks < 1) fail("ranks = {}: must be >= 1", ranks);
  if (ranks > kMaxRanks) fail("ranks = {}: must be <= {} (the supported limit)", ranks, kMaxRanks);
  if (tokens_per_rank < 1) fail("tokens-per-rank = {}: must be >= 1", tokens_per_rank);
  if (tokens_per_rank > kMaxTokensPerRank) {
    fail("tokens-per-rank = {}: must be <= {} (the supported limit)", tokens_per_rank, kMaxTokensPerRank);
  }
  // Both factors are bounded above, so the product cannot overflow.
  if (static_cast<Tokens>(ranks) * tokens_per_rank > kMaxBatchTokens) {
    fail("ranks x tokens-per-rank = {} x {} = {}: a batch must hold <= {} tokens (the supported limit)", ranks,
         tokens_per_rank, static_cast<Tokens>(ranks) * tokens_per_rank, kMaxBatchTokens);
  }
}

BoundarySplit parse_boundary_split(std::string_view text, std::string_view field) {
  if (text == "contiguous") return BoundarySplit::kContiguous;
  if (text == "head-tail") return BoundarySplit::kHeadTail;
  fail("{} = '{}': must be contiguous or head-tail", field, text);
}

const char* to_string(BoundarySplit split) { return split == BoundarySplit::kHeadTail ? "head-tail" : "contiguous"; }

namespace {

// Head pieces are whole multiples of the kernels' 64-token tile, so a head/tail cut falls on a tile edge.
constexpr Tokens kHeadPieceMultiple = 64;

// Re-lays the pieces of one document (contiguous, in token order, one per rank) as a head and a tail
// piece per rank, each rank keeping its piece's size: heads from the start in rank order, tails from the
// end in the same order. Appends the document's segments to `out`, sorted by token.
void lay_head_tail(const std::vector<Segment>& pieces, Tokens length, std::vector<Segment>& out) {
  std::vector<Segment> tails;
  Tokens head = 0, tail = length;
  for (const auto& p : pieces) {
    const Tokens size = p.tokens.size();
    const Tokens h = size / 2 / kHeadPieceMultiple * kHeadPieceMultiple;  // the tail takes the rest
    if (h > 0) out.push_back({p.doc, {head, head + h}, p.rank});
    head += h;
    tails.push_back({p.doc, {tail - (size - h), tail}, p.rank});
    tail -= size - h;
  }
  out.insert(out.end(), tails.rbegin(), tails.rend());
}

}  // namespace

Batch pack_batch(const std::vector<Document>& documents, int ranks, Tokens tokens_per_rank, BoundarySplit split) {
  validate_batch_shape(ranks, tokens_per_rank);
  Batch batch;
  batch.ranks = ranks;
  batch.tokens_per_rank = tokens_per_rank;
  const Tokens capacity = static_cast<Tokens>(ranks) * tokens_per_rank;
  Tokens total = 0;
  for (const auto& doc : documents) {
    if (doc.length < 1) fail("document {} length = {}: must be >= 1", doc.id, doc.length);
    check_mask_lengths(doc.mask, doc.head_masks, doc.length, fmt::format("document {}", doc.id));
    if (total + doc.length > capacity) {
      fail(
          "documents: {} tokens from document {} on do not fit in ranks x tokens-per-rank = {} x {} = {} "
          "(document {} would be cut at token {}): pack fewer documents, or use a BatchStream, which carries "
          "the rest into its next batch",
          total + doc.length, doc.id, ranks, tokens_per_rank, capacity, doc.id, capacity - total);
    }
    total += doc.length;
  }
  Tokens placed = 0;
  std::vector<Segment> pieces;  // one document's, reused
  for (const auto& doc : documents) {
    const int index = static_cast<int>(batch.documents.size());
    batch.documents.push_back(doc);
    // Split the document at every rank boundary it crosses.
    pieces.clear();
    for (Tokens offset = 0; offset < doc.length;) {
      const Tokens global = placed + offset;
      const int rank = static_cast<int>(global / tokens_per_rank);
      const Tokens room = (rank + 1) * tokens_per_rank - global;
      const Tokens take = std::min(room, doc.length - offset);
      pieces.push_back({index, {offset, offset + take}, rank});
      offset += take;
    }
    if (split == BoundarySplit::kHeadTail && pieces.size() > 1) {
      lay_head_tail(pieces, doc.length, batch.segments);
    } else {
      batch.segments.insert(batch.segments.end(), pieces.begin(), pieces.end());
    }
    placed += doc.length;
  }
  return batch;
}

BatchStream::BatchStream(LengthFn next_length, int ranks, Tokens tokens_per_rank, MaskSpec mask, BoundarySplit split)
    : next_length_(std::move(next_length)),
      ranks_(ranks),
      tokens_per_rank_(tokens_per_rank),
      mask_(std::move(mask)),
      split_(split) {
  validate_batch_shape(ranks, tokens_per_rank);
}

Batch BatchStream::next() {
  const Tokens capacity = static_cast<Tokens>(ranks_) * tokens_per_rank_;
  std::vector<Document> docs;
  Tokens total = 0;
  auto push = [&](Tokens length) {
    docs.push_back({next_id_++, length, mask_});
    total += length;
  };
  if (carried_tokens_ > 0) push(carried_tokens_);
  while (total < capacity) {
    const Tokens length = next_length_();
    FULCRUM_CHECK(length >= 1, "length source produced {}", length);
    push(length);
  }
  carried_tokens_ = total - capacity;  // the cut-off part of the last document starts the next batch
  docs.back().length -= carried_tokens_;
  return pack_batch(docs, ranks_, tokens_per_rank_, split_);
}

Batch batch_from_rank_layout(const std::vector<std::vector<Tokens>>& lengths_per_rank, Tokens tokens_per_rank,
                             const MaskSpec& mask, std::int64_t first_id) {
  if (lengths_per_rank.empty()) fail("lengths: no ranks (one list of document lengths per rank)");
  if (tokens_per_rank < 0) fail("tokens_per_rank = {}: must be >= 0 (0: the largest rank's total)", tokens_per_rank);
  if (lengths_per_rank.size() > static_cast<std::size_t>(kMaxRanks)) {
    fail("lengths: {} ranks, more than the supported {}", lengths_per_rank.size(), kMaxRanks);
  }
  Batch batch;
  batch.ranks = static_cast<int>(lengths_per_rank.size());
  Tokens largest = 0;
  for (std::size_t r = 0; r < lengths_per_rank.size(); ++r) {
    Tokens held = 0;
    for (std::size_t i = 0; i < lengths_per_rank[r].size(); ++i) {
      const Tokens length = lengths_per_rank[r][i];
      if (length < 1) fail("lengths[{}][{}] = {}: a document must have >= 1 token", r, i, length);
      mask.check_length(length, fmt::format("lengths[{}][{}]", r, i));
      const int index = static_cast<int>(batch.documents.size());
      batch.documents.push_back({first_id + index, length, mask});
      batch.segments.push_back({index, {0, length}, static_cast<int>(r)});
      held += length;
    }
    if (tokens_per_rank > 0 && held > tokens_per_rank) {
      fail("lengths[{}]: rank {} holds {} tokens, more than tokens_per_rank = {}", r, r, held, tokens_per_rank);
    }
    largest = std::max(largest, held);
  }
  if (largest == 0) fail("lengths: every rank is empty; a batch needs at least one token");
  batch.tokens_per_rank = tokens_per_rank > 0 ? tokens_per_rank : largest;
  validate_batch_shape(batch.ranks, batch.tokens_per_rank);  // the supported limits
  return batch;
}

}  // namespace fulcrum

#include "fulcrum/planners/baselines/static_cp.hpp"

#include <algorithm>

namespace fulcrum {
namespace {

// The packed sequence (documents in order) cut into 2n chunks of equal size (±1 token), chunk j on
// rank j or 2n − 1 − j, as segments sorted by (doc, tokens).
std::vector<Segment> zigzag_segments(const Batch& batch) {
  const Tokens total = batch.total_tokens();
  const int chunks = 2 * batch.ranks;
  auto bound = [&](int j) { return total * j / chunks; };
  auto owner = [&](int j) { return j < batch.ranks ? j : chunks - 1 - j; };
  std::vector<Segment> segments;
  Tokens offset = 0;  // where the document starts in the packed sequence
  for (int d = 0; d < static_cast<int>(batch.documents.size()); ++d) {
    const Range doc{offset, offset + batch.documents[d].length};
    // Only the chunks the document overlaps: from the one holding its first token (bound(j) <= offset
    // for this j; one before it, for rounding) until one starts past its end.
    for (int j = std::max(0, static_cast<int>(offset * chunks / std::max<Tokens>(total, 1)) - 1);
         j < chunks && bound(j) < doc.end; ++j) {
      const Range piece = intersect(doc, Range{bound(j), bound(j + 1)});
      if (!piece.empty()) segments.push_back({d, {piece.begin - offset, piece.end - offset}, owner(j)});
    }
    offset = doc.end;
  }
  return segments;
}

}  // namespace

Assignment StaticCpPlanner::do_plan(const Batch& batch) {
  Assignment a{.planner = {}, .batch = batch, .tasks = {}, .transfers = {}, .ring_node_ranks = batch.ranks};
  if (layout_ == CpLayout::kZigzag) a.batch.segments = zigzag_segments(batch);
  // Step s of rank r: its rows against the chunk that arrives from rank r − s, where some row sees it.
  for (const auto& rows : a.batch.segments) {
    const auto& doc = a.batch.documents[rows.doc];
    for (const auto& keys : a.batch.segments_of(rows.doc)) {
      if (doc.planning_mask().keys_needed(rows.tokens, keys.tokens, doc.length).empty()) continue;
      a.tasks.push_back({rows.doc, {rows.tokens, Range{}}, keys.tokens, rows.rank});
    }
  }
  // The ring passes every rank's K/V to every other rank, whatever the mask lets it use: one broadcast
  // per chunk (ranks x chunks explicit transfers ran out of memory at thousands of ranks).
  if (batch.ranks > 1) {
    a.transfers.reserve(a.batch.segments.size());
    for (const auto& held : a.batch.segments)
      a.transfers.push_back({TensorKind::kKV, held.doc, held.tokens, held.rank, kEveryRank});
  }
  return a;
}

namespace {

PlannerRegistration static_cp_registration(std::string_view name, std::string_view summary, CpLayout layout) {
  return {.name = name,
          .summary = summary,
          .capabilities = {.moves_attention = false,
                           .splits_documents = true,
                           .keeps_documents = true,
                           .keeps_placement = layout == CpLayout::kRing,
                           .masks = all_mask_kinds()},  // band masks exactly; index-list masks over their hull
          .options = {},
          .make = [layout](const PlannerOptions&) { return std::make_unique<StaticCpPlanner>(layout); }};
}

}  // namespace

PlannerRegistration ring_registration() {
  return static_cp_registration("ring", "static ring CP: contiguous chunks, every rank's K/V to every rank",
                                CpLayout::kRing);
}

PlannerRegistration zigzag_registration() {
  return static_cp_registration("zigzag", "static zigzag CP: 2 x ranks chunks, every rank's K/V to every rank",
                                CpLayout::kZigzag);
}

}  // namespace fulcrum

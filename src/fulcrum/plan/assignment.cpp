#include "fulcrum/plan/assignment.hpp"

#include "fulcrum/core/error.hpp"
#include "fulcrum/workload/head_masks.hpp"

#include <algorithm>
#include <unordered_map>
#include <utility>

namespace fulcrum {

const char* to_string(TensorKind kind) {
  switch (kind) {
    case TensorKind::kQ: return "Q";
    case TensorKind::kKV: return "KV";
    case TensorKind::kOut: return "O";
  }
  return "?";
}

void add_transfers_from_owners(const Batch& batch, TensorKind kind, int doc, Range range, int dst,
                               std::vector<Transfer>& out, HeadRange heads) {
  for (const auto& segment : batch.segments_overlapping(doc, range)) {
    const Range piece = intersect(segment.tokens, range);
    if (piece.empty() || segment.rank == dst) continue;
    out.push_back({kind, doc, piece, segment.rank, dst, heads});
  }
}

std::vector<Transfer> minimal_transfers(const Batch& batch, std::span<const CATask> tasks, int q_heads_per_kv_head) {
  int q_heads = 0;  // 0: no task cuts heads, and one group stands for all of them
  for (const auto& task : tasks) q_heads = task.heads.all() ? q_heads : std::max(q_heads, task.heads.end);
  const int group = q_heads > 0 ? q_heads_per_kv_head : 1;
  if (group < 1 || (q_heads > 0 && q_heads % group != 0)) {
    fail("q_heads_per_kv_head = {}: must be >= 1 and divide the tasks' {} q heads", q_heads_per_kv_head, q_heads);
  }
  const int groups = q_heads > 0 ? q_heads / group : 1;
  std::vector<Transfer> out;
  // What each (server, document) pair has already been sent, per kv group, so shared K/V moves once.
  std::unordered_map<std::uint64_t, PerHeadRangeSet> received_kv;  // key: server << 32 | doc
  for (const auto& task : tasks) {
    const auto& doc = batch.documents[task.doc];
    PerHeadRangeSet& have =
        received_kv
            .try_emplace((static_cast<std::uint64_t>(task.server) << 32) | static_cast<std::uint32_t>(task.doc), groups)
            .first->second;
    const HeadRange heads = q_heads > 0 ? task.heads.normalized(q_heads) : task.heads;
    const int g0 = heads.first() / group, g1 = heads.all() ? groups : (heads.last(q_heads) - 1) / group + 1;
    const auto runs = mask_runs(doc.mask, doc.head_masks, task.heads);
    for (const auto& q : task.query_ranges()) {
      add_transfers_from_owners(batch, TensorKind::kQ, task.doc, q, task.server, out, heads);
      // O and LSE of every row go back to the row's owner.
      for (const auto& segment : batch.segments_overlapping(task.doc, q)) {
        const Range piece = intersect(segment.tokens, q);
        if (!piece.empty() && segment.rank != task.server) {
          out.push_back({TensorKind::kOut, task.doc, piece, task.server, segment.rank, heads});
        }
      }
      for (const auto& needed : keys_needed(runs, q, task.keys, doc.length)) {
        for (const auto& gap : have.add_missing(needed, g0, g1)) {
          const HeadRange served =
              q_heads > 0 ? HeadRange{gap.head_begin * group, gap.head_end * group}.normalized(q_heads) : HeadRange{};
          add_transfers_from_owners(batch, TensorKind::kKV, task.doc, gap.tokens, task.server, out, served);
        }
      }
    }
  }
  return out;
}

}  // namespace fulcrum

#include "fulcrum/plan/assignment.hpp"

#include "fulcrum/workload/head_masks.hpp"

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
                               std::vector<Transfer>& out) {
  for (const auto& segment : batch.segments_of(doc)) {
    const Range piece = intersect(segment.tokens, range);
    if (piece.empty() || segment.rank == dst) continue;
    out.push_back({kind, doc, piece, segment.rank, dst});
  }
}

std::vector<Transfer> minimal_transfers(const Batch& batch, std::span<const CATask> tasks) {
  std::vector<Transfer> out;
  // What each (server, document) pair has already been sent, so shared K/V context moves once.
  std::unordered_map<std::uint64_t, RangeSet> received_kv;  // key: server << 32 | doc
  for (const auto& task : tasks) {
    const auto& doc = batch.documents[task.doc];
    RangeSet& have =
        received_kv[(static_cast<std::uint64_t>(task.server) << 32) | static_cast<std::uint32_t>(task.doc)];
    const auto runs = mask_runs(doc.mask, doc.head_masks, task.heads);
    for (const auto& q : task.query_ranges()) {
      add_transfers_from_owners(batch, TensorKind::kQ, task.doc, q, task.server, out);
      // O and LSE of every row go back to the row's owner.
      for (const auto& segment : batch.segments_of(task.doc)) {
        const Range piece = intersect(segment.tokens, q);
        if (!piece.empty() && segment.rank != task.server) {
          out.push_back({TensorKind::kOut, task.doc, piece, task.server, segment.rank});
        }
      }
      for (const auto& needed : keys_needed(runs, q, task.keys, doc.length)) {
        for (const auto& gap : have.missing(needed)) {
          add_transfers_from_owners(batch, TensorKind::kKV, task.doc, gap, task.server, out);
          have.add(gap);
        }
      }
    }
  }
  return out;
}

}  // namespace fulcrum

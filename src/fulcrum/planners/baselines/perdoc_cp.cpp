#include "fulcrum/planners/baselines/perdoc_cp.hpp"

#include "fulcrum/core/error.hpp"

#include <algorithm>
#include <map>

namespace fulcrum {

const OptionSpec& cp_degree_option() {
  static const OptionSpec spec{.name = "cp-degree",
                               .help = "perdoc-cp, wlb: ranks per context-parallel group (0: perdoc-cp 8, wlb 1)",
                               .kind = OptionKind::kInteger,
                               .default_value = 0,
                               .min = 0,
                               .max = 1 << 20};
  return spec;
}

Assignment PerDocCpPlanner::do_plan(const Batch& batch) { return per_document_cp(batch, cp_); }

Assignment per_document_cp(const Batch& batch, int cp_degree) {
  FULCRUM_CHECK(cp_degree >= 1, "cp = {}", cp_degree);
  const int cp = std::min(cp_degree, batch.ranks);
  Assignment a{.planner = {}, .batch = batch, .tasks = {}, .transfers = {}};
  a.batch.segments.clear();
  struct Piece {
    int doc;
    Range tokens;
    int first_rank, group_size;
  };
  // The part of each document a CP group holds after packing: consecutive segments in one group.
  std::vector<Piece> pieces;
  for (const auto& s : batch.segments) {
    const int group = s.rank / cp;
    const int first = group * cp;
    const int size = std::min(cp, batch.ranks - first);
    if (!pieces.empty() && pieces.back().doc == s.doc && pieces.back().first_rank == first) {
      pieces.back().tokens.end = s.tokens.end;
    } else {
      pieces.push_back({s.doc, s.tokens, first, size});
    }
  }
  std::vector<Transfer> gather;
  for (const auto& p : pieces) {
    const int chunks = 2 * p.group_size;
    auto bound = [&](int j) { return p.tokens.begin + p.tokens.size() * j / chunks; };
    auto owner = [&](int j) { return p.first_rank + (j < p.group_size ? j : chunks - 1 - j); };
    for (int j = 0; j < chunks; ++j) {
      const Range chunk{bound(j), bound(j + 1)};
      if (!chunk.empty()) a.batch.segments.push_back({p.doc, chunk, owner(j)});
    }
    for (int i = 0; i < p.group_size; ++i) {
      const Range head{bound(i), bound(i + 1)}, tail{bound(chunks - 1 - i), bound(chunks - i)};
      std::array<Range, 2> rows = head.empty() ? std::array<Range, 2>{tail, Range{}} : std::array<Range, 2>{head, tail};
      if (rows[0].empty()) continue;
      CATask task{p.doc, rows, {}, p.first_rank + i};
      task.keys = visible_key_hull(batch.documents[p.doc], task.query_ranges());
      a.tasks.push_back(task);
      // All-gather: the rank receives every chunk of the piece it does not own.
      for (int j = 0; j < chunks; ++j) {
        const Range chunk{bound(j), bound(j + 1)};
        if (!chunk.empty() && owner(j) != task.server) {
          gather.push_back({TensorKind::kKV, p.doc, chunk, owner(j), task.server});
        }
      }
    }
  }
  // Keys outside a group's piece (a document the packing split across groups) still move point to point.
  std::map<std::pair<int, int>, RangeSet> gathered;
  for (const auto& t : gather) gathered[{t.dst, t.doc}].add(t.tokens);
  a.transfers = std::move(gather);
  for (const auto& t : minimal_transfers(a.batch, a.tasks)) {
    if (t.kind != TensorKind::kKV || !gathered[{t.dst, t.doc}].covers(t.tokens)) a.transfers.push_back(t);
  }
  return a;
}

PlannerRegistration perdoc_cp_registration() {
  return {
      .name = "perdoc-cp",
      .summary = "per-document context parallelism: 2 cp chunks per document, K/V all-gathered per group",
      .capabilities = {.moves_attention = false,
                       .splits_documents = true,
                       .keeps_documents = true,
                       .keeps_placement = false,
                       .masks = all_mask_kinds(),  // band masks exactly; index-list masks over their hull
                       .cp_groups = CpGroups::kWithinGroup},
      .options = {cp_degree_option()},
      .make = [](const PlannerOptions& o) { return std::make_unique<PerDocCpPlanner>(o.get_int(cp_degree_option())); }};
}

}  // namespace fulcrum

#include "fulcrum/planners/baselines/packed.hpp"

namespace fulcrum {

PlannerCapabilities PackedPlanner::capabilities() const {
  return {.moves_attention = false,
          .splits_documents = true,  // only where the packing already split a document
          .keeps_documents = true,
          .keeps_placement = true,
          .masks = all_mask_kinds()};  // band masks exactly; index-list masks over their causal hull
}

Assignment PackedPlanner::plan(const Batch& batch) {
  options_.validate(batch.tokens_per_rank);
  Assignment a{.planner = "packed", .batch = batch, .tasks = {}, .transfers = {}};
  for (const auto& s : batch.segments) {
    const Range rows[] = {s.tokens};
    a.tasks.push_back({s.doc, {s.tokens, Range{}}, visible_key_hull(batch.documents[s.doc], rows), s.rank});
  }
  a.transfers = minimal_transfers(a.batch, a.tasks);
  return a;
}

}  // namespace fulcrum

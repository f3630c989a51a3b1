#include "fulcrum/planners/baselines/packed.hpp"

namespace fulcrum {

Assignment PackedPlanner::do_plan(const Batch& batch) {
  Assignment a{.planner = {}, .batch = batch, .tasks = {}, .transfers = {}};
  for (const auto& s : batch.segments) {
    const Range rows[] = {s.tokens};
    a.tasks.push_back({s.doc, {s.tokens, Range{}}, visible_key_hull(batch.documents[s.doc], rows), s.rank});
  }
  a.transfers = minimal_transfers(a.batch, a.tasks);
  return a;
}

PlannerRegistration packed_registration() {
  return {.name = "packed",
          .summary = "every rank computes the rows it holds after packing (imbalanced, little traffic)",
          .capabilities = {.moves_attention = false,
                           .splits_documents = true,  // only where the packing already split a document
                           .keeps_documents = true,
                           .keeps_placement = true,
                           .masks = all_mask_kinds()},  // band masks exactly; index-list masks over their hull
          .options = {},
          .make = [](const PlannerOptions&) { return std::make_unique<PackedPlanner>(); }};
}

}  // namespace fulcrum

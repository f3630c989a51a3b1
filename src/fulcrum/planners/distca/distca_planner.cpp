#include "fulcrum/planners/distca/distca_planner.hpp"

#include "fulcrum/planners/distca/scheduler.hpp"

namespace fulcrum {

PlannerCapabilities DistcaPlanner::capabilities() const {
  return {.moves_attention = true,
          .splits_documents = true,
          .keeps_documents = true,
          .keeps_placement = true,
          .masks = all_mask_kinds()};  // band masks exactly; index-list masks over their causal hull
}

Assignment DistcaPlanner::plan(const Batch& batch) {
  options_.validate(batch.tokens_per_rank);
  auto result = distca::schedule(batch, options_.model, {options_.tolerance, options_.granularity});
  Assignment a{.planner = "distca", .batch = batch, .tasks = distca::items_to_tasks(batch, result.items),
               .transfers = {}};
  a.transfers = minimal_transfers(a.batch, a.tasks);
  return a;
}

}  // namespace fulcrum

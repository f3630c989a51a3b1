// Baseline "packed": every rank computes the attention of the rows it holds after packing. No CA-task
// moves; the only traffic is the K/V prefix a rank needs for a document the packing split across ranks.
#pragma once

#include "fulcrum/planners/planner.hpp"

namespace fulcrum {

class PackedPlanner : public Planner {
 protected:
  Assignment do_plan(const Batch& batch) override;
};

PlannerRegistration packed_registration();

}  // namespace fulcrum

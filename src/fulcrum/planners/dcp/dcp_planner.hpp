// DCP (dynamic blockwise context parallelism): documents cut into blocks (blocks.hpp), data and
// computation blocks placed on devices by hierarchical hypergraph partitioning (partitioner.hpp) that
// minimises the bytes moved under compute and memory balance. The tokens move with their data blocks,
// so the Assignment's batch carries DCP's placement, not the packing's. Every task carries its division
// (divisions.hpp), which the ping-pong schedule runs as ordered nano-batches.
#pragma once

#include "fulcrum/planners/planner.hpp"

namespace fulcrum {

class DcpPlanner : public Planner {
 public:
  explicit DcpPlanner(const PlannerOptions& options) : options_(options) {}

 protected:
  Assignment do_plan(const Batch& batch) override;

 private:
  PlannerOptions options_;
};

PlannerRegistration dcp_registration();

}  // namespace fulcrum

// DCP (dynamic blockwise context parallelism): documents cut into blocks (blocks.hpp), data and
// computation blocks placed on devices by hierarchical hypergraph partitioning (partitioner.hpp) that
// minimises the bytes moved under compute and memory balance. The tokens move with their data blocks,
// so the Assignment's batch carries DCP's placement, not the packing's. Every task carries its division
// (divisions.hpp), which the ping-pong schedule runs as ordered nano-batches. With dcp-head-blocks = H > 1
// every tile is H computation blocks over equal ranges of whole GQA groups, so one document's heads can
// spread over devices; its tasks then carry those head ranges.
#pragma once

#include "fulcrum/planners/planner.hpp"

namespace fulcrum {

class DcpPlanner : public Planner {
 public:
  /// Throws a bad-input Error when dcp-head-blocks does not suit the model (dcp::check_head_blocks).
  explicit DcpPlanner(const PlannerOptions& options);

 protected:
  Assignment do_plan(const Batch& batch) override;

 private:
  PlannerOptions options_;
};

PlannerRegistration dcp_registration();

}  // namespace fulcrum

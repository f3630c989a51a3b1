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
  /// Refuses a batch beyond kDcpMaxComputeBlocks computation blocks or documents beyond
  /// kDcpMaxDocumentBlocks blocks, naming dcp-block and the block size that would fit.
  void check_batch_size(const Batch& batch) const override;

 private:
  PlannerOptions options_;
};

/// The largest batch DCP plans, in blocks of dcp-block tokens. Its multilevel partitioner's cost grows
/// faster than the blocks (coarsening rates every pin of a vertex's nets, and a document of n blocks has
/// nets of n pins): 64 ranks x 2^20 tokens at block 1024 ran for over 10 minutes (256 ranks: out of
/// memory), while near the bounds it plans in seconds: the same batch at block 16384 in 8.5 s of CPU, one
/// document of 256 blocks in 6.2 s, release build (docs/performance.md, "Scale").
inline constexpr double kDcpMaxComputeBlocks = 131072;  // non-empty tiles x head blocks
inline constexpr Tokens kDcpMaxDocumentBlocks = 256;    // blocks of the longest document

PlannerRegistration dcp_registration();

}  // namespace fulcrum

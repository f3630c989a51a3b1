// MTraining's layouts over a context-parallel ring (spec mtraining.md section 2): every document is
// stored block-striped over all ranks, G-token block g on rank g mod W (G = 1: token-striped), which
// spreads every attention offset, hence every slash of a sparse pattern, evenly over ranks and ring
// steps, where contiguous and zigzag chunks concentrate them. An all-to-all shuffles the packed tokens
// into this layout before attention (and back after); here the planner's Batch is that layout: each
// document is stored permuted (its masks wrapped as `striped:W:G:...`, slot p holding source position
// MaskSpec::source_position(p)), and rank a holds slots [a n, (a + 1) n) of every document.
//
// The ring: rank a computes its slots against every rank's slots, one step per rank, as a flat ring
// ("striped") or hierarchical ("mtraining": an inner ring over a machine's ranks while the inter-machine
// transfer flies, when the ranks span several machines). Tiles the mask empties cost nothing in the
// kernels; a task is still emitted for every (rank, rank) pair, as the permuted document is planned over
// its full hull.
#pragma once

#include "fulcrum/planners/planner.hpp"

namespace fulcrum {

class StripedRingPlanner final : public Planner {
 public:
  /// `block`: G tokens per stripe, set by the option `block_option` (named in errors); `node_ranks`: ranks
  /// per machine of the ring (0: one flat ring).
  StripedRingPlanner(Tokens block, std::string_view block_option, int node_ranks)
      : block_(block), block_option_(block_option), node_ranks_(node_ranks) {}
  Tokens document_length_multiple(int ranks) const override { return ranks * block_; }

 protected:
  Assignment do_plan(const Batch& batch) override;

 private:
  Tokens block_;
  std::string_view block_option_;
  int node_ranks_;
};

PlannerRegistration striped_registration();
PlannerRegistration mtraining_registration();

}  // namespace fulcrum

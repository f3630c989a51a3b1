// Exact head assignment by depth-first branch-and-bound, used by lpt-ls to prove (or reach) the optimum.
#pragma once

#include "fulcrum/planners/heads/cost_model.hpp"

#include <cstdint>

namespace fulcrum::heads {

struct BranchAndBoundResult {
  HeadAssignment device;  // the best found: the incumbent unless the search improved it
  double time = 0;        // its T_layer
  bool complete = false;  // the search ended within the node limit: `device` is optimal
  std::int64_t nodes = 0;
};

/// Heads are placed in descending t_attn (ties by index). A branch is cut when the device it fills, or
/// (placed compute + Σ remaining (t_attn + t_qo) + one K/V projection per untouched group) / D, reaches the
/// incumbent. Symmetries: empty devices are interchangeable (only the first is tried), and consecutive heads
/// of one group with equal times take non-decreasing devices. Ends at once when the incumbent reaches
/// `lower_bound` (then it is optimal too).
BranchAndBoundResult branch_and_bound(const LayerCosts& costs, int devices, const HeadAssignment& incumbent,
                                      double lower_bound, std::int64_t node_limit);

}  // namespace fulcrum::heads

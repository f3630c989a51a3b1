// One solver on one layer, measured: its assignment, per-device times, T_layer, spread, gap to the lower
// bound and solve time. What `fulcrum heads`, `fulcrum.assign_heads` and the bench report.
#pragma once

#include "fulcrum/planners/heads/solver.hpp"

#include <nlohmann/json_fwd.hpp>

namespace fulcrum::heads {

struct HeadSolverResult {
  std::string solver;
  HeadSolution solution;
  DeviceTimes times;
  double layer_s = 0;
  double spread = 0;                // (max - min) / max of the device times
  double lower_bound_s = 0;         // lower_bound
  double lower_bound_simple_s = 0;  // lower_bound_simple: max(max head, Σ / D) with the GQA rule
  double gap = 0;                   // layer_s / lower_bound_s - 1
  double solve_s = 0;               // median wall time of `repeats` solves (each gives the same assignment)
};

/// Solves `repeats` >= 1 times (checked through solve_heads) and measures.
HeadSolverResult run_head_solver(const HeadSolverRegistration& solver, const LayerCosts& costs, int devices,
                                 std::uint64_t seed, int repeats);
nlohmann::json to_json(const HeadSolverResult& result);

}  // namespace fulcrum::heads

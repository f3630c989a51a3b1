// A head solver over a whole model: every layer of a head pattern report priced by the cost model, each
// layer's costs turned into an assignment of q heads to devices, and what the cost model predicts for it.
// What the prefill runtime (prefill/head_plan) and the prefill simulator (sim/prefill) both plan with.
#pragma once

#include "fulcrum/planners/heads/cost_model.hpp"
#include "fulcrum/planners/heads/patterns.hpp"
#include "fulcrum/workload/model_shape.hpp"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace fulcrum::heads {

/// Per layer of the model, the report's layer priced for a prompt of `tokens` (bad input from the report:
/// head counts that do not match the model; from the profile: a pattern it lacks, a length outside its grid).
std::vector<LayerCosts> model_layer_costs(const HeadPatternReport& report, const ModelShape& shape, Tokens tokens,
                                          const HeadCostModel& model);

struct ModelPlan {
  std::string solver;                      // a registered head solver, or what gave a fixed assignment
  std::vector<HeadAssignment> assignment;  // [layer][q head] -> device
  std::vector<DeviceTimes> predicted;      // per layer, per device: the cost model's time
  std::vector<double> lower_bound_s;       // per layer: lower_bound
  double solve_s = 0;                      // the solver's wall time over all layers

  /// Σ over layers of the predicted T_layer (the slowest device per layer).
  double predicted_total_s() const;
};

/// Solves every layer with `solver` (bad input naming `solver` or `devices` from solve_heads), every layer
/// with `seed`, as `fulcrum heads --patterns ... --seed` does, so it reproduces the plan.
ModelPlan solve_model(std::string_view solver, const std::vector<LayerCosts>& costs, int devices, std::uint64_t seed);
/// A given assignment (e.g. an --assignment file), priced by the same model.
ModelPlan price_model(std::string name, std::vector<HeadAssignment> assignment, const std::vector<LayerCosts>& costs,
                      int devices);

}  // namespace fulcrum::heads

// How FlexAttn's planning side drives a prefill: a head pattern report gives every head its mask
// (heads::report_masks, the one pattern-to-mask mapping) and, through the cost model, every layer's costs;
// a head solver turns each layer's costs into an assignment of q heads to ranks. The plan keeps what the
// cost model predicts for that assignment, so a report can print it beside the measured times.
#pragma once

#include "fulcrum/planners/heads/cost_model.hpp"
#include "fulcrum/planners/heads/patterns.hpp"
#include "fulcrum/prefill/head_assignment.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace fulcrum::prefill {

/// The cost model for a model's heads: the profile when given, else the analytic fallback with the model's
/// head dim and hidden size (its rates are an H100's: only ratios between heads mean anything then).
heads::HeadCostModel head_cost_model(const ModelShape& shape, std::optional<heads::RuntimeProfile> profile);

/// Per layer of the model, the report's layer priced for a prompt of `tokens` (bad input from the profile:
/// a pattern it lacks, a length outside its grid).
std::vector<heads::LayerCosts> prefill_layer_costs(const heads::HeadPatternReport& report, const ModelShape& shape,
                                                   Tokens tokens, const heads::HeadCostModel& model);

struct HeadPlan {
  std::string solver;                         // a registered head solver, or what gave a fixed assignment
  HeadAssignment assignment;                  // [layer][q head] -> rank
  std::vector<heads::DeviceTimes> predicted;  // per layer, per rank: the cost model's time
  std::vector<double> lower_bound_s;          // per layer: heads::lower_bound
  double solve_s = 0;                         // the solver's wall time over all layers

  /// Σ over layers of the predicted T_layer (the slowest rank per layer).
  double predicted_total_s() const;
};

/// Solves every layer with `solver` (bad input naming `solver` or `devices` from heads::solve_heads), every
/// layer with `seed`, as `fulcrum heads --patterns ... --seed` does, so it reproduces the plan.
HeadPlan solve_head_plan(std::string_view solver, const std::vector<heads::LayerCosts>& costs, int ranks,
                         std::uint64_t seed);
/// A given assignment (e.g. an --assignment file), priced by the same model.
HeadPlan fixed_head_plan(std::string name, HeadAssignment assignment, const std::vector<heads::LayerCosts>& costs,
                         int ranks);

}  // namespace fulcrum::prefill

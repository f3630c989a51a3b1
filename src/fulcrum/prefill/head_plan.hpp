// How FlexAttn's planning side drives a prefill: a head pattern report gives every head its mask
// (heads::report_masks, the one pattern-to-mask mapping) and, through the cost model, every layer's costs;
// a head solver turns each layer's costs into an assignment of q heads to ranks. The plan keeps what the
// cost model predicts for that assignment, so a report can print it beside the measured times.
#pragma once

#include "fulcrum/planners/heads/cost_model.hpp"
#include "fulcrum/planners/heads/model_plan.hpp"
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

}  // namespace fulcrum::prefill

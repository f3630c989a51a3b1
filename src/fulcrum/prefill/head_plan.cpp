#include "fulcrum/prefill/head_plan.hpp"

#include "fulcrum/core/error.hpp"
#include "fulcrum/planners/heads/evaluate.hpp"

#include <utility>

namespace fulcrum::prefill {

heads::HeadCostModel head_cost_model(const ModelShape& shape, std::optional<heads::RuntimeProfile> profile) {
  heads::HeadCostModel model;
  model.profile = std::move(profile);
  model.analytic.head_dim = shape.head_dim;
  model.analytic.hidden = shape.hidden;
  return model;
}

std::vector<heads::LayerCosts> prefill_layer_costs(const heads::HeadPatternReport& report, const ModelShape& shape,
                                                   Tokens tokens, const heads::HeadCostModel& model) {
  report.check_model(shape);
  std::vector<heads::LayerCosts> costs;
  costs.reserve(static_cast<std::size_t>(shape.layers));
  for (int l = 0; l < shape.layers; ++l) {
    costs.push_back(model.layer(report.layers[static_cast<std::size_t>(l)], shape.kv_heads, tokens));
  }
  return costs;
}

double HeadPlan::predicted_total_s() const {
  double total = 0;
  for (const auto& t : predicted) total += t.layer_s();
  return total;
}

HeadPlan solve_head_plan(std::string_view solver, const std::vector<heads::LayerCosts>& costs, int ranks,
                         std::uint64_t seed) {
  const heads::HeadSolverRegistration& registration = heads::find_head_solver(solver);
  HeadPlan plan;
  plan.solver = std::string(registration.name);
  for (const heads::LayerCosts& layer : costs) {
    const auto r = heads::run_head_solver(registration, layer, ranks, seed, 1);
    plan.assignment.push_back(r.solution.device);
    plan.predicted.push_back(r.times);
    plan.lower_bound_s.push_back(r.lower_bound_s);
    plan.solve_s += r.solve_s;
  }
  return plan;
}

HeadPlan fixed_head_plan(std::string name, HeadAssignment assignment, const std::vector<heads::LayerCosts>& costs,
                         int ranks) {
  FULCRUM_CHECK(assignment.size() == costs.size(), "assignment of {} layers for {}", assignment.size(), costs.size());
  HeadPlan plan;
  plan.solver = std::move(name);
  for (std::size_t l = 0; l < costs.size(); ++l) {
    plan.predicted.push_back(heads::device_times(costs[l], assignment[l], ranks));
    plan.lower_bound_s.push_back(heads::lower_bound(costs[l], ranks));
  }
  plan.assignment = std::move(assignment);
  return plan;
}

}  // namespace fulcrum::prefill

#include "fulcrum/planners/heads/model_plan.hpp"

#include "fulcrum/core/error.hpp"
#include "fulcrum/planners/heads/evaluate.hpp"
#include "fulcrum/planners/heads/solver.hpp"

#include <utility>

namespace fulcrum::heads {

std::vector<LayerCosts> model_layer_costs(const HeadPatternReport& report, const ModelShape& shape, Tokens tokens,
                                          const HeadCostModel& model) {
  report.check_model(shape);
  std::vector<LayerCosts> costs;
  costs.reserve(static_cast<std::size_t>(shape.layers));
  for (int l = 0; l < shape.layers; ++l) {
    costs.push_back(model.layer(report.layers[static_cast<std::size_t>(l)], shape.kv_heads, tokens));
  }
  return costs;
}

double ModelPlan::predicted_total_s() const {
  double total = 0;
  for (const auto& t : predicted) total += t.layer_s();
  return total;
}

ModelPlan solve_model(std::string_view solver, const std::vector<LayerCosts>& costs, int devices, std::uint64_t seed) {
  const HeadSolverRegistration& registration = find_head_solver(solver);
  ModelPlan plan;
  plan.solver = std::string(registration.name);
  for (const LayerCosts& layer : costs) {
    const auto r = run_head_solver(registration, layer, devices, seed, 1);
    plan.assignment.push_back(r.solution.device);
    plan.predicted.push_back(r.times);
    plan.lower_bound_s.push_back(r.lower_bound_s);
    plan.solve_s += r.solve_s;
  }
  return plan;
}

ModelPlan price_model(std::string name, std::vector<HeadAssignment> assignment, const std::vector<LayerCosts>& costs,
                      int devices) {
  FULCRUM_CHECK(assignment.size() == costs.size(), "assignment of {} layers for {}", assignment.size(), costs.size());
  ModelPlan plan;
  plan.solver = std::move(name);
  for (std::size_t l = 0; l < costs.size(); ++l) {
    plan.predicted.push_back(device_times(costs[l], assignment[l], devices));
    plan.lower_bound_s.push_back(lower_bound(costs[l], devices));
  }
  plan.assignment = std::move(assignment);
  return plan;
}

}  // namespace fulcrum::heads

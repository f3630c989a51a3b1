#include "fulcrum/planners/heads/evaluate.hpp"

#include "fulcrum/core/error.hpp"
#include "fulcrum/core/statistics.hpp"

#include <nlohmann/json.hpp>

#include <chrono>

namespace fulcrum::heads {

HeadSolverResult run_head_solver(const HeadSolverRegistration& solver, const LayerCosts& costs, int devices,
                                 std::uint64_t seed, int repeats) {
  if (repeats < 1) fail("repeats = {}: must be >= 1", repeats);
  HeadSolverResult r;
  r.solver = std::string(solver.name);
  std::vector<double> seconds;
  for (int i = 0; i < repeats; ++i) {
    const auto start = std::chrono::steady_clock::now();
    HeadSolution s = solve_heads(solver, costs, devices, seed);
    seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    FULCRUM_CHECK(i == 0 || s.device == r.solution.device, "solver {} is not deterministic", solver.name);
    r.solution = std::move(s);
  }
  r.solve_s = median(seconds);
  r.times = device_times(costs, r.solution.device, devices);
  r.layer_s = r.times.layer_s();
  r.spread = r.times.spread();
  r.lower_bound_s = lower_bound(costs, devices);
  r.lower_bound_simple_s = lower_bound_simple(costs, devices);
  r.gap = r.lower_bound_s > 0 ? r.layer_s / r.lower_bound_s - 1 : 0;
  return r;
}

nlohmann::json to_json(const HeadSolverResult& r) {
  return {{"assignment", r.solution.device},
          {"device_s", r.times.time_s},
          {"layer_s", r.layer_s},
          {"spread", r.spread},
          {"lower_bound_s", r.lower_bound_s},
          {"lower_bound_simple_s", r.lower_bound_simple_s},
          {"gap", r.gap},
          {"proven_optimal", r.solution.proven_optimal},
          {"solve_ms", r.solve_s * 1e3}};
}

}  // namespace fulcrum::heads

// The head-solver registry: one line per solver, and the checked entry point.
#include "fulcrum/planners/heads/solver.hpp"

#include "fulcrum/core/error.hpp"
#include "fulcrum/planners/heads/solvers.hpp"

#include <fmt/ranges.h>

namespace fulcrum::heads {

const std::vector<HeadSolverRegistration>& head_solver_registry() {
  static const std::vector<HeadSolverRegistration> registry = {
      {"uniform", "Megatron tensor parallelism: contiguous blocks of heads", false, false, solve_uniform},
      {"random", "each head on a random device (counts may differ)", false, false, solve_random},
      {"random-uniform", "a random permutation of heads in equal blocks", false, false, solve_random_uniform},
      {"greedy", "FlexAttn's greedy: heads by descending time, each where the new maximum is least", true, false,
       solve_greedy},
      {"sa", "simulated annealing: move, swap and group-swap, Metropolis acceptance", true, false,
       [](const LayerCosts& c, int d, std::uint64_t s) { return solve_sa(c, d, s); }},
      {"ga", "FlexAttn's genetic algorithm (population 30, roulette, crossover 0.8, mutation 0.02, 80 generations)",
       true, false, [](const LayerCosts& c, int d, std::uint64_t s) { return solve_ga(c, d, s); }},
      {"lpt-ls", "ours: KV-group-aware LPT, local search on the critical device, branch-and-bound proof", true, true,
       [](const LayerCosts& c, int d, std::uint64_t s) { return solve_lpt_ls(c, d, s); }},
  };
  return registry;
}

std::vector<std::string> head_solver_names() {
  std::vector<std::string> names;
  for (const auto& r : head_solver_registry()) names.emplace_back(r.name);
  return names;
}

const HeadSolverRegistration& find_head_solver(std::string_view name) {
  for (const auto& r : head_solver_registry()) {
    if (r.name == name) return r;
  }
  fail("solver = '{}': unknown; choose from {}", name, fmt::join(head_solver_names(), ", "));
}

HeadSolution solve_heads(const HeadSolverRegistration& solver, const LayerCosts& costs, int devices,
                         std::uint64_t seed) {
  costs.validate();
  if (devices < 1 || devices > costs.heads()) {
    fail("devices = {}: must be in [1, {}] (the layer's q heads)", devices, costs.heads());
  }
  HeadSolution s = solver.solve(costs, devices, seed);
  FULCRUM_CHECK(static_cast<int>(s.device.size()) == costs.heads(), "solver {} assigned {} of {} heads", solver.name,
                s.device.size(), costs.heads());
  for (std::size_t h = 0; h < s.device.size(); ++h) {
    FULCRUM_CHECK(s.device[h] >= 0 && s.device[h] < devices, "solver {} put head {} on device {} of {}", solver.name, h,
                  s.device[h], devices);
  }
  FULCRUM_CHECK(solver.can_prove_optimal || !s.proven_optimal, "solver {} claims a proof it cannot give", solver.name);
  if (s.proven_optimal) {
    const double t = layer_time(costs, s.device, devices);
    FULCRUM_CHECK(t >= lower_bound_quick(costs, devices) * (1 - 1e-9), "solver {}: optimum {} below the lower bound {}",
                  solver.name, t, lower_bound_quick(costs, devices));
  }
  return s;
}

HeadSolution solve_heads(std::string_view solver, const LayerCosts& costs, int devices, std::uint64_t seed) {
  return solve_heads(find_head_solver(solver), costs, devices, seed);
}

}  // namespace fulcrum::heads

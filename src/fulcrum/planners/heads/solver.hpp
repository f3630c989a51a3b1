// Head solvers: FlexAttn's allocators, each a function from one layer's costs, the device count and a seed
// to a device per q head. They are not Planners (no Batch, no CATasks: a head assignment is a layout the
// prefill runtime and the simulator read), so they have their own small registry in the same style as
// planners/registry.cpp: one registration per solver (name, summary, what it declares), looked up by name,
// and one checked entry point (`solve_heads`) that validates the input, runs the solver and checks the
// contract every solver keeps (every head on a device in range; a claimed optimum is at least the bound).
#pragma once

#include "fulcrum/planners/heads/cost_model.hpp"

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace fulcrum::heads {

struct HeadSolution {
  HeadAssignment device;        // per q head
  bool proven_optimal = false;  // the solver proved no assignment has a smaller T_layer
};

using HeadSolveFn = std::function<HeadSolution(const LayerCosts& costs, int devices, std::uint64_t seed)>;

struct HeadSolverRegistration {
  std::string_view name;
  std::string_view summary;  // one line, for --help and docs
  bool uses_costs = true;    // false: the layout ignores the heads' times (uniform, random, random-uniform)
  bool can_prove_optimal = false;
  HeadSolveFn solve;
};

/// Every registered solver, in the order the CLI lists them.
const std::vector<HeadSolverRegistration>& head_solver_registry();
/// The registration called `name`; bad input naming `solver` and the choices otherwise.
const HeadSolverRegistration& find_head_solver(std::string_view name);
std::vector<std::string> head_solver_names();

/// Validates (costs; devices in [1, heads], naming `devices`), solves, and checks the result.
HeadSolution solve_heads(const HeadSolverRegistration& solver, const LayerCosts& costs, int devices,
                         std::uint64_t seed);
HeadSolution solve_heads(std::string_view solver, const LayerCosts& costs, int devices, std::uint64_t seed);

}  // namespace fulcrum::heads

// The solvers behind the registry (solver.hpp); call them through solve_heads, which checks their input.
// Each is deterministic in (costs, devices, seed).
#pragma once

#include "fulcrum/planners/heads/solver.hpp"

namespace fulcrum::heads {

/// Megatron: head h on device floor(h x D / H), contiguous blocks (equal when D divides H).
HeadSolution solve_uniform(const LayerCosts& costs, int devices, std::uint64_t seed);
/// Each head on a uniformly drawn device (counts may differ; a device may stay idle).
HeadSolution solve_random(const LayerCosts& costs, int devices, std::uint64_t seed);
/// A random permutation of the heads cut into Megatron's blocks (equal counts).
HeadSolution solve_random_uniform(const LayerCosts& costs, int devices, std::uint64_t seed);
/// The published greedy: heads by descending attention time, each to the device that minimises the new
/// maximum load (ties: the smaller new load on that device, then the lower device).
HeadSolution solve_greedy(const LayerCosts& costs, int devices, std::uint64_t seed);

struct SaOptions {
  int iterations = 20000;
  double initial_temperature = 0.05;  // x the starting T_layer
  double final_temperature = 1e-5;    // x the starting T_layer; geometric cooling in between
};
/// Simulated annealing from a random-uniform start: move a head, swap two heads of different devices, or
/// swap two KV groups (the j-th heads of groups g and h exchange devices); Metropolis acceptance on T_layer.
HeadSolution solve_sa(const LayerCosts& costs, int devices, std::uint64_t seed, const SaOptions& options = {});

struct GaOptions {  // the published parameters
  int population = 30;
  double crossover = 0.8;  // single-point, per pair of parents
  double mutation = 0.02;  // per gene: move the head to a uniformly chosen other device
  int generations = 80;
  int stagnation = 20;  // stop when the best has not improved for this many generations
};
/// The published genetic algorithm: uniform random population, roulette-wheel parents (weight 1/T_layer),
/// survivors = the best `population` of parents and offspring (so the best is always kept).
HeadSolution solve_ga(const LayerCosts& costs, int devices, std::uint64_t seed, const GaOptions& options = {});

struct LptLsOptions {
  int kicks = 20;                  // iterated local search: perturb-and-descend rounds
  std::int64_t node_limit = 5000;  // branch-and-bound nodes before giving up a proof
  double target_gap = 0.0;         // stop once T_layer <= (1 + gap) x lower_bound
};
/// Ours: KV-group-aware LPT (whole groups as items, and head by head; the better start), descent on the
/// critical device alternating with pairwise balancing (moves between two devices: one head or one device's
/// part of a KV group out, one head or one part back, or nothing back; all priced in O(1)), iterated with
/// seeded kicks (a few heads, or one group's part), then a branch-and-bound over heads in descending cost
/// that proves optimality or improves the incumbent within `node_limit` nodes (device symmetry broken;
/// bounded by the loads plus the remaining work over D). Stops, proven optimal, where its time reaches
/// lower_bound_quick or the pieces relaxation refutes every time below it (pieces_allow).
HeadSolution solve_lpt_ls(const LayerCosts& costs, int devices, std::uint64_t seed, const LptLsOptions& options = {});

}  // namespace fulcrum::heads

// DCP's placement solver: a multilevel balanced hypergraph partitioner (coarsening.hpp → initial
// partition here → refinement.hpp on every level, then V-cycles), and its hierarchical use: first
// across machines with a looser balance, then across the devices of each machine.
//
// Why written here rather than taken from a library: the objective is connectivity (λ − 1), which
// METIS (graphs, edge cut) can only approximate through a clique or star expansion, and DCP needs two
// balance constraints (compute and memory) that KaHyPar's Python package does not offer. On
// single-constraint versions of the same hypergraphs (k = 32, ε = 0.1) it reaches 1.09x KaHyPar's λ − 1
// (1.11x on held-out batches) in under half its time with the planner's settings (8 initial partitions,
// 12 V-cycles; docs/experiments.md, bench/compare_kahypar.py); KaHyPar's flow refinement is what it lacks.
#pragma once

#include "fulcrum/planners/dcp/hypergraph.hpp"

#include <cstdint>
#include <vector>

namespace fulcrum::dcp {

struct PartitionConfig {
  int parts = 2;
  double epsilon = 0.1;  // every part's weight ≤ (1 + ε) · total / parts, per constraint
  /// Also allow mean + the heaviest vertex, for constraints too coarse for ε (a device that holds four
  /// data blocks cannot be within 10% when blocks differ in size). Off: the strict KaHyPar bound.
  bool allow_heaviest_vertex = true;
  std::uint64_t seed = 0;
  int initial_tries = 8;  // seeded initial partitions (each bisection of a recursive one tries as many)
  /// V-cycles after the first multilevel pass: coarsen again within the parts found (no cluster spans
  /// two parts, so the partition carries over whole), refine on the way back up, keep the better one.
  /// The bisections of the initial partition run at most one. 0: the partitioner without V-cycles.
  int vcycles = 12;

  void validate() const;
};

/// The per-constraint part weight limits the config sets for `h`.
std::vector<double> balance_limits(const Hypergraph& h, const PartitionConfig& config);

/// The part of every vertex, in [0, parts). Best effort on balance when it cannot be met.
std::vector<int> partition(const Hypergraph& h, const PartitionConfig& config);

struct HierarchyConfig {
  int machines = 1;
  int devices_per_machine = 8;
  double epsilon_machines = 0.4;
  double epsilon_devices = 0.1;
  bool allow_heaviest_vertex = true;
  std::uint64_t seed = 0;
};

/// Device of every vertex (machine · devices_per_machine + device): machines first, then each machine's
/// induced hypergraph across its devices.
std::vector<int> partition_hierarchical(const Hypergraph& h, const HierarchyConfig& config);

}  // namespace fulcrum::dcp

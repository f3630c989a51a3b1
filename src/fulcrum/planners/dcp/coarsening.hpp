// Coarsening, the first phase of the multilevel partitioner: vertices join the clusters they share
// heavy, small nets with (the heavy-edge rating  Σ w(e) / (|e| − 1)  over common nets), and clusters
// are contracted, level after level, until the hypergraph is small enough for an initial partition.
#pragma once

#include "fulcrum/planners/dcp/hypergraph.hpp"

#include <cstdint>
#include <vector>

namespace fulcrum::dcp {

struct CoarseLevel {
  Hypergraph graph;
  std::vector<int> fine_to_coarse;  // per vertex of the finer level: its vertex here
};

/// One level: a clustering contracted. A vertex may join a cluster only while every constraint's sum
/// stays at most `max_cluster_weight[c]`, or one side has zero weight in it (so a data block can gather
/// the computation blocks around it). Seeded visiting order; returns the level unchanged in size if
/// nothing can join.
CoarseLevel coarsen_once(const Hypergraph& h, const std::vector<double>& max_cluster_weight, std::uint64_t seed);

/// Levels from finest to coarsest, stopping at `target_vertices` or when a level shrinks by < 5%.
std::vector<CoarseLevel> coarsen(const Hypergraph& h, int target_vertices, const std::vector<double>& max_cluster_weight,
                                 std::uint64_t seed);

}  // namespace fulcrum::dcp

// Coarsening, the first phase of the multilevel partitioner: vertices join the clusters they share
// heavy, small nets with (the heavy-edge rating  Σ w(e) / (|e| − 1)  over common nets), and clusters
// are contracted, level after level, until the hypergraph is small enough for an initial partition.
#pragma once

#include "fulcrum/planners/dcp/hypergraph.hpp"

#include <cstdint>
#include <span>
#include <vector>

namespace fulcrum::dcp {

struct CoarseLevel {
  Hypergraph graph;
  std::vector<int> fine_to_coarse;  // per vertex of the finer level: its vertex here
};

/// One level: a clustering contracted. A vertex may join a cluster only while every constraint's sum
/// stays at most `max_cluster_weight[c]`, or one side has zero weight in it (so a data block can gather
/// the computation blocks around it). With `parts` (one per vertex; empty: none), only vertices of one
/// part may join, so the partition is still defined on the coarse level and its objective unchanged
/// (the V-cycles of the partitioner). Seeded visiting order; returns the level unchanged in size if
/// nothing can join.
CoarseLevel coarsen_once(const Hypergraph& h, const std::vector<double>& max_cluster_weight, std::uint64_t seed,
                         std::span<const int> parts = {});

/// Levels from finest to coarsest, stopping at `target_vertices` or when a level shrinks by < 5%;
/// `parts` as in coarsen_once, carried down to every level.
std::vector<CoarseLevel> coarsen(const Hypergraph& h, int target_vertices,
                                 const std::vector<double>& max_cluster_weight, std::uint64_t seed,
                                 std::span<const int> parts = {});

/// `parts` of the finest level carried to the coarsest of `levels` (each coarse vertex takes the part
/// of its members; they share one when the levels were coarsened within `parts`).
std::vector<int> project_to_coarsest(const std::vector<CoarseLevel>& levels, std::vector<int> parts);

}  // namespace fulcrum::dcp

// Which rank computes each q head, per layer (FlexAttn's assignment: counts per rank may differ and a KV
// group may be split), and what that means for one rank: its heads in local order and the layout of its
// local Q/K/V/O tensors.
#pragma once

#include "fulcrum/workload/model_shape.hpp"

#include <string>
#include <string_view>
#include <vector>

namespace fulcrum::prefill {

/// [layer][q head] -> rank.
using HeadAssignment = std::vector<std::vector<int>>;

/// Megatron's tensor parallelism: rank r computes heads [r·H/N, (r+1)·H/N) of every layer. ranks <= q_heads.
HeadAssignment contiguous_assignment(const ModelShape& shape, int ranks);

/// Bad input naming `field` unless there is one row per layer, one rank per q head, each in [0, ranks).
/// A rank may hold no head of a layer (it then only joins the all-reduce).
void validate_assignment(const HeadAssignment& assignment, const ModelShape& shape, int ranks, std::string_view field);

/// A JSON file: an array of layers, each an array of ranks per q head. Validated as above; errors name the
/// file and the element (e.g. "a.json: assignment[2][5] = 7: must be in [0, 3]").
HeadAssignment read_assignment_file(const std::string& path, const ModelShape& shape, int ranks);

/// One rank's heads of one layer, in local order: by KV group, then by head. Its local Q and O hold
/// groups.size() x slots_per_group heads (group j's heads in slots [j·m, j·m + count(j)), the rest unused),
/// its local K and V groups.size() heads, so the attention kernel's GQA rule (q slot s reads kv head s / m)
/// holds for any assignment, split groups included.
struct RankHeads {
  std::vector<int> heads;        // global q heads
  std::vector<int> groups;       // global KV groups it needs, ascending
  std::vector<int> group_begin;  // heads of groups[j] are heads[group_begin[j] .. group_begin[j + 1]); size+1
  int slots_per_group = 0;       // m: the most heads of one group on this rank

  int count(std::size_t group) const { return group_begin[group + 1] - group_begin[group]; }
  int slots() const { return static_cast<int>(groups.size()) * slots_per_group; }
  /// The local slot of heads[i].
  int slot(std::size_t i) const;
};

RankHeads rank_heads(const std::vector<int>& layer_assignment, const ModelShape& shape, int rank);

}  // namespace fulcrum::prefill

// Step 1 of the DistCA scheduler: the Items it moves. An Item is a set of query rows of one document
// with the keys its mask lets them see, clipped to a key range: initially the rows each rank holds after
// packing (a whole document, or the part of one the packing put there) against all their keys, later
// head+tail shard pairs carved from them, or the same rows cut along their keys (partial-K/V tasks,
// whose partial outputs merge by LSE at the rows' owner).
#pragma once

#include "fulcrum/plan/assignment.hpp"
#include "fulcrum/workload/model_shape.hpp"

#include <array>
#include <limits>
#include <vector>

namespace fulcrum::distca {

struct Item {
  int doc = 0;
  std::array<Range, 2> rows{};  // one contiguous range, or a head+tail pair
  int server = 0;
  double flops = 0;       // forward core-attention FLOPs (per layer)
  Range keys = kAllKeys;  // the rows see only keys in here (and their mask's)

  static constexpr Range kAllKeys{0, std::numeric_limits<Tokens>::max()};
};

/// Forward FLOPs of `rows` of `doc` against the keys in `keys` its mask lets them see.
double rows_flops(const ModelShape& model, const Document& doc, Range rows, Range keys = Item::kAllKeys);

/// One Item per packing segment, on the rank that holds it.
std::vector<Item> initial_items(const Batch& batch, const ModelShape& model);

/// The CA-tasks that compute the items, each reading the smallest key range its rows need.
std::vector<CATask> items_to_tasks(const Batch& batch, const std::vector<Item>& items);

/// The Assignment that computes the items: their tasks and the transfers they need (minimal_transfers).
Assignment items_to_assignment(const Batch& batch, const std::vector<Item>& items);

}  // namespace fulcrum::distca

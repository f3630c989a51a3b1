// Step 1 of the DistCA scheduler: the Items it moves. An Item is a set of query rows of one document
// with the keys its mask lets them see: initially the rows each rank holds after packing (a whole
// document, or the part of one the packing put there), later head+tail shard pairs carved from them.
#pragma once

#include "fulcrum/plan/assignment.hpp"
#include "fulcrum/workload/model_shape.hpp"

#include <array>
#include <vector>

namespace fulcrum::distca {

struct Item {
  int doc = 0;
  std::array<Range, 2> rows{};  // one contiguous range, or a head+tail pair
  int server = 0;
  double flops = 0;  // forward core-attention FLOPs (per layer)
};

/// Forward FLOPs of `rows` of `doc` against every key its mask lets them see.
double rows_flops(const ModelShape& model, const Document& doc, Range rows);

/// One Item per packing segment, on the rank that holds it.
std::vector<Item> initial_items(const Batch& batch, const ModelShape& model);

/// The CA-tasks that compute the items, each reading the smallest key range its rows need.
std::vector<CATask> items_to_tasks(const Batch& batch, const std::vector<Item>& items);

}  // namespace fulcrum::distca

// DCP's divisions: each device's computation blocks grouped into T ordered divisions so that the traffic
// of division i+1 arrives while division i computes (compile runs them as its nano-batches). Division 0
// is every block whose data the device holds (no traffic, so it hides the first dispatch); divisions
// 1..T−2 each get an equal share of the remaining traffic as a budget, filled one block at a time from
// the device that has the least compute in that division so far (its block adding the fewest bytes to
// what the division already fetches); the last division takes the rest.
#pragma once

#include "fulcrum/planners/dcp/blocks.hpp"

#include <span>
#include <vector>

namespace fulcrum::dcp {

/// `device[v]` is the partition of placement_hypergraph(blocks): computation blocks first, then data
/// blocks. Returns the division of every computation block, in [0, divisions).
std::vector<int> assign_divisions(const Blocks& blocks, std::span<const int> device, int divisions,
                                  const ModelShape& model);

/// Bytes each division moves: every device fetches a data block's Q (and returns its O) and K/V once per
/// division it needs them in, as compile does when it runs the divisions as nano-batches; with head
/// blocks, once per head block, counting only that head block's bytes (head_block_token_bytes).
std::vector<double> division_traffic_bytes(const Blocks& blocks, std::span<const int> device,
                                           std::span<const int> division, const ModelShape& model);

}  // namespace fulcrum::dcp

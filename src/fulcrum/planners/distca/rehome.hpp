// Step 4 of the DistCA scheduler: re-homing items off the rank that moves the most bytes.
//
// The greedy loop (scheduler.hpp) balances FLOPs and ranks each move by its own FLOPs per byte. It does
// not see what a move leaves behind: the tail of a long document computed on its owner needs the whole
// document's K/V there, and a head owner sends its K/V once to every server of the document's later
// rows. This pass reads the plan's per-rank traffic (bytes sent + received, counted as
// `minimal_transfers` sends them: Q and O+LSE once per item, K/V once per server and document; keys from
// the document mask's keys_needed, as the scheduler's shards count them) and, while
// it can, moves one whole item of a document the busiest rank takes part in to another server that
// already computes or owns part of that document. When the destination would leave the tolerance it hands
// back items of other documents (largest first) to the item's server. A set of moves is kept only if the
// busiest rank then moves fewer bytes, no rank it touches ends at or above that rank's old traffic, total
// bytes stay within `rehome_bytes` (a fraction) above the plan's before the pass, and both servers stay
// within the tolerance (or no further out than before). So the maximum never rises, the total by at most
// the budget, the FLOPs guarantee stands, and the pass ends (capped besides). The budget lets a set trade a
// few bytes for a lower busiest rank: handing a long document's rows back to their owner can send a short
// document's Q, K/V and O the other way, more bytes in all than the K/V it saves.
#pragma once

#include "fulcrum/planners/distca/items.hpp"

#include <vector>

namespace fulcrum::distca {

/// The pass's share of DistCA's options, under their option names (declared in distca_planner.cpp).
struct RehomeLimits {
  double tolerance;     // servers stay within tolerance x the mean load (or no further out than before)
  double rehome_bytes;  // total bytes stay within (1 + rehome_bytes) x the plan's before the pass
};

/// Moves items (their `server`) and updates `load` (FLOPs per server); returns how many sets of moves
/// were kept.
int rehome_busiest_ranks(const Batch& batch, const ModelShape& model, std::vector<Item>& items,
                         std::vector<double>& load, RehomeLimits limits);

/// The bytes each rank sends + receives when these items are compiled, as the pass counts them.
std::vector<double> rank_traffic(const Batch& batch, const ModelShape& model, const std::vector<Item>& items);

}  // namespace fulcrum::distca

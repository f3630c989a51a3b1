// Step 3 of the DistCA scheduler: the communication-aware greedy loop.
//
//   F̄ = total / servers; servers above F̄ have a surplus S, below it a deficit D.
//   Visit deficit servers, largest deficit first. For deficit d, every Item on a surplus server s is a
//   candidate carrying ΔFmax = min(F_item, S_s, D_d + κ·tolerance·F̄); its cheapest shard (shard.hpp)
//   gives the bytes Vcomm; candidates rank by E = ΔF / Vcomm; the best moves (split off when ΔF < F_item).
//   Stop when every server is within tolerance·F̄, or no candidate can move a granule.
// κ = 0 is the paper's rule. With κ > 0 (Fulcrum's default) a deficit takes one large shard of a long
// document where the paper's rule fills it to the mean and leaves slivers for later deficits, each
// needing nearly the whole document's K/V: at 512 ranks that sent one document's K/V to 20 servers.
// With busiest_first < 1 (default 0.5) the most loaded server's best shard moves instead whenever its E
// is at least that fraction of the best E: its surplus goes out in large shards before only slivers fit.
#pragma once

#include "fulcrum/planners/distca/items.hpp"

#include <vector>

namespace fulcrum::distca {

/// The scheduler's share of DistCA's options, under their option names. Their defaults and ranges are the
/// declarations in distca_planner.cpp (distca_options() reads them); nothing here declares them again.
struct SchedulerOptions {
  double tolerance;
  Tokens granularity;
  /// How far past the mean a move may fill its destination, as a fraction of tolerance x mean (0: to
  /// the mean, the paper's ΔFmax; below 1, so every destination stays inside the tolerance).
  double overshoot;
  /// Also move partial-K/V shards: an item's rows against a prefix or suffix of its keys (shard.hpp).
  bool partial_kv;
  /// A move takes the most loaded server's best shard instead of the best shard of any server when its
  /// FLOPs per byte is at least this fraction of the best's (1: only the best, the paper's rule).
  double busiest_first;
};

struct ScheduleResult {
  std::vector<Item> items;
  std::vector<double> server_flops;
  int moves = 0;
};

ScheduleResult schedule(const Batch& batch, const ModelShape& model, const SchedulerOptions& options);

}  // namespace fulcrum::distca

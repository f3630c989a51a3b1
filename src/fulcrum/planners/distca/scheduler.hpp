// Step 3 of the DistCA scheduler: the communication-aware greedy loop.
//
//   F̄ = total / servers; servers above F̄ have a surplus S, below it a deficit D.
//   Visit deficit servers, largest deficit first. For deficit d, every Item on a surplus server s is a
//   candidate carrying ΔFmax = min(F_item, S_s, D_d); its cheapest shard (shard.hpp) gives the bytes
//   Vcomm; candidates rank by E = ΔF / Vcomm; the best moves (split off when ΔF < F_item).
//   Stop when every server is within tolerance·F̄, or no candidate can move a granule.
#pragma once

#include "fulcrum/planners/distca/items.hpp"

#include <vector>

namespace fulcrum::distca {

struct SchedulerOptions {
  double tolerance = 0.1;
  Tokens granularity = 128;
};

struct ScheduleResult {
  std::vector<Item> items;
  std::vector<double> server_flops;
  int moves = 0;
};

ScheduleResult schedule(const Batch& batch, const ModelShape& model, const SchedulerOptions& options);

}  // namespace fulcrum::distca

// `fulcrum profile`: the kernels' measured throughput over a grid of shard shapes (query rows x key
// rows), forward and backward, as the ProfileTable the cost model and simulator load. Each cell times a
// dense rectangle, fused with copies of itself until every thread has work, so the table reports
// what a shard of that shape costs inside a server's fused call (tile efficiency), not how well one
// lone shard parallelises.
#pragma once

#include "fulcrum/cost/profile_table.hpp"
#include "fulcrum/kernels/timing.hpp"

#include <functional>
#include <vector>

namespace fulcrum::kernels {

/// The most lengths on each axis of the grid (each cell is timed; the table interpolates between them).
inline constexpr std::size_t kMaxProfileAxis = 64;

struct ProfileConfig {
  std::vector<Tokens> query_lengths = {64, 128, 256, 512, 1024, 2048, 4096};
  std::vector<Tokens> key_lengths = {64, 256, 1024, 4096, 16384};
  AttentionShape shape{8, 8, 128, 0};
  DType dtype = DType::kF32;
  int repeats = 3;
  void validate() const;
};

struct Profile {
  ProfileTable table;
  CallOverheads overheads;  // measure_call_overheads, after the grid (warm threads and caches)
};

/// The grid, then the calls' fixed costs; calls `progress(done, total)` after each cell when given. The fixed
/// costs are taken out of each cell's time, since the simulator charges a call's and its items' fixed costs
/// beside the table's rate: a small cell's rate would otherwise count them once more.
Profile profile_attention(const ProfileConfig& config, const std::function<void(int, int)>& progress = nullptr);

}  // namespace fulcrum::kernels

#include "fulcrum/kernels/tiles.hpp"

#include <algorithm>
#include <limits>

namespace fulcrum::kernels {
namespace {

// Cost of a tile: its visible pairs against (queries) or from (keys) the task's other side.
// Whether each task's key rows overlap another task's: a sweep over the ranges sorted by first row.
std::vector<char> shares_keys(std::span<const AttentionTask> tasks) {
  std::vector<std::size_t> order(tasks.size());
  for (std::size_t t = 0; t < order.size(); ++t) order[t] = t;
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return tasks[a].keys.row < tasks[b].keys.row; });
  std::vector<char> shared(tasks.size(), 0);
  Tokens reach = std::numeric_limits<Tokens>::min();
  std::size_t reach_task = 0;
  for (std::size_t t : order) {
    const auto& k = tasks[t].keys;
    if (k.count == 0) continue;
    if (k.row < reach) shared[t] = shared[reach_task] = 1;
    if (k.row + k.count > reach) reach = k.row + k.count, reach_task = t;
  }
  return shared;
}

std::vector<WorkItem> tiles(std::span<const AttentionTask> tasks, int heads, bool of_keys, Tokens rows) {
  std::vector<WorkItem> items;
  const std::vector<char> shared = of_keys ? shares_keys(tasks) : std::vector<char>(tasks.size(), 0);
  for (std::size_t t = 0; t < tasks.size(); ++t) {
    const auto& task = tasks[t];
    const Range keys = positions(task.keys, 0, task.keys.count);
    auto add_tiles = [&](const TokenRows& r) {
      for (Tokens offset = 0; offset < r.count; offset += rows) {
        const Tokens count = std::min<Tokens>(rows, r.count - offset);
        const Range span = positions(r, offset, count);
        double pairs = 0;
        if (of_keys) {
          for (const auto& q : task.queries) {
            pairs += static_cast<double>(task.mask.count_pairs(positions(q, 0, q.count), span, task.doc_len));
          }
        } else {
          pairs = static_cast<double>(task.mask.count_pairs(span, keys, task.doc_len));
        }
        if (pairs == 0 && of_keys) continue;  // empty query tiles still write O = 0, LSE = -inf
        for (int h = 0; h < heads; ++h) {
          items.push_back({static_cast<int>(t), h, {r.row + offset, r.position + offset, count}, pairs, shared[t] != 0});
        }
      }
    };
    if (of_keys) {
      add_tiles(task.keys);
    } else {
      for (const auto& q : task.queries) add_tiles(q);
    }
  }
  std::stable_sort(items.begin(), items.end(), [](const WorkItem& a, const WorkItem& b) { return a.cost > b.cost; });
  return items;
}

}  // namespace

float* call_workspace(int slot, std::size_t floats) {
  thread_local simd::Floats slots[4];
  auto& buffer = slots[slot];
  if (buffer.size() < floats) buffer.resize(floats);
  return buffer.data();
}

std::vector<WorkItem> query_tiles(std::span<const AttentionTask> tasks, int heads, Tokens rows) {
  return tiles(tasks, heads, false, rows);
}
std::vector<WorkItem> key_tiles(std::span<const AttentionTask> tasks, int kv_heads) {
  return tiles(tasks, kv_heads, true, simd::kTile);
}

}  // namespace fulcrum::kernels

#include "fulcrum/kernels/tiles.hpp"

#include "fulcrum/kernels/columns.hpp"

#include <algorithm>
#include <limits>

namespace fulcrum::kernels {
namespace {

// Cost of a tile: its visible pairs against (queries) or from (keys) the task's other side.
// Whether each task's key rows overlap another task's: a sweep over the ranges sorted by first row.
std::vector<char> shares_keys(std::span<const AttentionTask> tasks) {
  std::vector<std::size_t> order(tasks.size());
  for (std::size_t t = 0; t < order.size(); ++t) order[t] = t;
  std::sort(order.begin(), order.end(),
            [&](std::size_t a, std::size_t b) { return tasks[a].keys.row < tasks[b].keys.row; });
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

// Visible pairs of `span` against (query tiles) or from (key tiles) the task's other side, under the
// mask of q head h.
double tile_pairs(const AttentionTask& task, int h, bool of_keys, Range span) {
  const MaskSpec& mask = task.mask_of(h);
  if (!of_keys) {
    return static_cast<double>(mask.count_pairs(span, positions(task.keys, 0, task.keys.count), task.doc_len));
  }
  double pairs = 0;
  for (const auto& q : task.queries) {
    pairs += static_cast<double>(mask.count_pairs(positions(q, 0, q.count), span, task.doc_len));
  }
  return pairs;
}

// Query tiles: one item per q head of the task. Key tiles: one per kv head whose group holds some of
// the task's heads, costed by the pairs of those heads. Pairs are counted once per tile while the
// task has one mask (the all-head case), per head otherwise.
std::vector<WorkItem> tiles(std::span<const AttentionTask> tasks, int q_heads, int kv_heads, bool of_keys,
                            Tokens rows) {
  std::vector<WorkItem> items;
  const std::vector<char> shared = of_keys ? shares_keys(tasks) : std::vector<char>(tasks.size(), 0);
  const int group = q_heads / kv_heads;
  for (std::size_t t = 0; t < tasks.size(); ++t) {
    const auto& task = tasks[t];
    const int h0 = task.heads.first(), h1 = task.heads.last(q_heads);
    const bool one_mask = task.head_masks.empty();
    auto add_tiles = [&](const RowSpan& r) {
      for (Tokens offset = 0; offset < r.count; offset += rows) {
        const Tokens count = std::min<Tokens>(rows, r.count - offset);
        const Range span = positions(r, offset, count);
        const RowSpan tile{r.row + offset, r.position + offset, count};
        const double shared_pairs = one_mask ? tile_pairs(task, h0, of_keys, span) : 0;
        if (!of_keys) {
          // Empty query tiles still write O = 0, LSE = -inf.
          for (int h = h0; h < h1; ++h) {
            const double pairs = one_mask ? shared_pairs : tile_pairs(task, h, false, span);
            items.push_back({static_cast<int>(t), h, tile, pairs, false});
          }
          continue;
        }
        for (int g = h0 / group; g * group < h1; ++g) {
          double pairs = 0;
          for (int h = std::max(h0, g * group); h < std::min(h1, (g + 1) * group); ++h) {
            pairs += one_mask ? shared_pairs : tile_pairs(task, h, true, span);
          }
          if (pairs == 0) continue;
          items.push_back({static_cast<int>(t), g, tile, pairs, shared[t] != 0});
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

std::vector<WorkItem> column_tiles(std::span<const AttentionTask> tasks, const CallColumns& columns, int q_heads,
                                   int kv_heads) {
  const std::vector<char> shared = shares_keys(tasks);
  std::vector<WorkItem> items;
  const auto sets = columns.sets();
  for (std::size_t s = 0; s < sets.size(); ++s) {
    const HeadColumns& c = sets[s];
    const AttentionTask& task = tasks[static_cast<std::size_t>(c.task)];
    const bool shares_rows =
        shared[static_cast<std::size_t>(c.task)] != 0 || (!task.head_masks.empty() && q_heads > kv_heads);
    Tokens query_rows = 0;
    for (const RowSpan& r : task.queries) query_rows += r.count;
    for (int chunk = 0; chunk < c.chunks; ++chunk) {
      const auto count = std::min<Tokens>(simd::kTile, static_cast<Tokens>(c.rows.size()) - chunk * simd::kTile);
      // Cost: an upper bound (every row of every head of the set sees every column), for ordering only.
      const double cost = static_cast<double>(count * query_rows * (c.q_end - c.q_begin));
      items.push_back({c.task, c.kv_head, {chunk * simd::kTile, 0, count}, cost, shares_rows, static_cast<int>(s)});
    }
  }
  std::stable_sort(items.begin(), items.end(), [](const WorkItem& a, const WorkItem& b) { return a.cost > b.cost; });
  return items;
}

float* call_workspace(int slot, std::size_t floats) {
  thread_local simd::Floats slots[4];
  auto& buffer = slots[slot];
  if (buffer.size() < floats) buffer.resize(floats);
  return buffer.data();
}

std::vector<WorkItem> query_tiles(std::span<const AttentionTask> tasks, int q_heads, Tokens rows) {
  return tiles(tasks, q_heads, 1, false, rows);
}
std::vector<WorkItem> key_tiles(std::span<const AttentionTask> tasks, int q_heads, int kv_heads) {
  return tiles(tasks, q_heads, kv_heads, true, simd::kTile);
}

}  // namespace fulcrum::kernels

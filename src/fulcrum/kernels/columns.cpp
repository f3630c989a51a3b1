#include "fulcrum/kernels/columns.hpp"

#include "fulcrum/core/error.hpp"
#include "fulcrum/kernels/simd.hpp"

#include <algorithm>
#include <map>
#include <optional>

namespace fulcrum::kernels {
namespace {

constexpr Tokens kTile = kColumnChunk;
static_assert(kTile == simd::kTile, "a gathered chunk is one kernel tile");

Tokens tiles_of(Tokens rows) { return (rows + kTile - 1) / kTile; }

// The columns of `split` that lie among the task's keys, as buffer rows (source order kept).
std::vector<Tokens> task_rows(const AttentionTask& task, const MaskColumns& split) {
  std::vector<Tokens> rows;
  for (Tokens slot : split.columns) {
    if (slot >= task.keys.position && slot < task.keys.position + task.keys.count) {
      rows.push_back(task.keys.row + slot - task.keys.position);
    }
  }
  return rows;
}

}  // namespace

// on_grid: for every query tile, the columns whose key tile the rest keeps there. Columns are grouped
// by key tile first, so each (query tile, key tile) is classified once, and key tiles in a 16-tile
// span the rest leaves empty for the query tile are skipped with one test (as the kernels' grid loops).
void mark_on_grid(const AttentionTask& task, HeadColumns& c) {
  constexpr Tokens kSpanTiles = 16;
  std::map<Tokens, std::vector<std::size_t>> by_tile;  // key tile -> column indices
  for (std::size_t j = 0; j < c.rows.size(); ++j) by_tile[(c.rows[j] - task.keys.row) / kTile].push_back(j);
  const auto chunks = static_cast<std::size_t>(c.chunks);
  c.on_grid.assign(static_cast<std::size_t>(query_tile_count(task)) * chunks, 0);
  std::size_t tile = 0;
  for (const RowSpan& range : task.queries) {
    for (Tokens offset = 0; offset < range.count; offset += kTile, ++tile) {
      const Range queries{range.position + offset, range.position + std::min<Tokens>(range.count, offset + kTile)};
      Tokens span = -1;
      bool span_empty = false;
      for (const auto& [key_tile, columns] : by_tile) {
        if (key_tile / kSpanTiles != span) {
          span = key_tile / kSpanTiles;
          const Tokens begin = task.keys.position + span * kSpanTiles * kTile;
          const Range keys{begin, std::min(begin + kSpanTiles * kTile, task.keys.position + task.keys.count)};
          span_empty = c.rest.classify(queries, keys, task.doc_len) == TileKind::kEmpty;
        }
        if (span_empty) continue;
        const Tokens first = task.keys.position + key_tile * kTile;
        const Range keys{first, std::min(first + kTile, task.keys.position + task.keys.count)};
        if (c.rest.classify(queries, keys, task.doc_len) == TileKind::kEmpty) continue;
        for (std::size_t j : columns) c.on_grid[tile * chunks + j / kTile] |= std::uint64_t{1} << (j % kTile);
      }
    }
  }
}

int query_tile_count(const AttentionTask& task) {
  Tokens tiles = 0;
  for (const RowSpan& range : task.queries) tiles += tiles_of(range.count);
  return static_cast<int>(tiles);
}

int query_tile_index(const AttentionTask& task, const RowSpan& tile) {
  Tokens before = 0;
  for (const RowSpan& range : task.queries) {
    const Tokens offset = tile.row - range.row;
    if (offset >= 0 && offset < range.count && tile.position - range.position == offset) {
      return static_cast<int>(before + offset / kTile);
    }
    before += tiles_of(range.count);
  }
  FULCRUM_CHECK(false, "rows at {} are no query tile of the task", tile.row);
  return -1;
}

std::uint64_t HeadColumns::row_bits(int tile, int chunk, Tokens source) const {
  const auto first = sources.begin() + static_cast<std::ptrdiff_t>(chunk) * kTile;
  const auto last = first + std::min<std::ptrdiff_t>(kTile, sources.end() - first);
  const auto seen = std::upper_bound(first, last, source) - first;
  const std::uint64_t bits = seen == kTile ? ~std::uint64_t{0} : (std::uint64_t{1} << seen) - 1;
  return bits &
         ~on_grid[static_cast<std::size_t>(tile) * static_cast<std::size_t>(chunks) + static_cast<std::size_t>(chunk)];
}

int HeadColumns::chunks_before(Tokens source) const {
  const auto seen = std::upper_bound(sources.begin(), sources.end(), source) - sources.begin();
  return static_cast<int>(tiles_of(seen));
}

std::optional<HeadColumns> head_columns(const AttentionTask& task, const MaskColumns& split, const MaskSpec& mask,
                                        int q_begin, int q_end, int kv_head) {
  std::vector<Tokens> rows = split.columns.empty() ? std::vector<Tokens>{} : task_rows(task, split);
  if (rows.empty()) return std::nullopt;
  HeadColumns c;
  c.kv_head = kv_head;
  c.q_begin = q_begin;
  c.q_end = q_end;
  c.rest = split.rest;
  for (Tokens row : rows)
    c.sources.push_back(mask.source_position(row - task.keys.row + task.keys.position, task.doc_len));
  c.rows = std::move(rows);
  c.chunks = static_cast<int>(tiles_of(static_cast<Tokens>(c.rows.size())));
  return c;
}

CallColumns::CallColumns(std::span<const AttentionTask> tasks, int q_heads, int kv_heads, const float* k_rows,
                         const float* v_rows, Tokens kv_rows, long ld)
    : q_heads_(q_heads), index_(tasks.size() * static_cast<std::size_t>(q_heads), -1) {
  const int group = q_heads / kv_heads;
  for (std::size_t t = 0; t < tasks.size(); ++t) {
    const AttentionTask& task = tasks[t];
    const bool one_mask = task.head_masks.empty();
    const int h1 = task.heads.last(q_heads);
    MaskColumns split;  // one mask: split once for every kv group
    for (int h = task.heads.first(); h < h1;) {
      const int end = one_mask ? std::min(h1, (h / group + 1) * group) : h + 1;
      if (!one_mask || h == task.heads.first()) split = task.mask_of(h).split_columns(task.doc_len);
      if (std::optional<HeadColumns> c = head_columns(task, split, task.mask_of(h), h, end, h / group)) {
        c->task = static_cast<int>(t);
        sets_.push_back(std::move(*c));
        for (int q = h; q < end; ++q)
          index_[t * static_cast<std::size_t>(q_heads) + static_cast<std::size_t>(q)] =
              static_cast<int>(sets_.size() - 1);
      }
      h = end;
    }
  }
  std::vector<std::size_t> first_row(sets_.size() + 1, 0);
  for (std::size_t i = 0; i < sets_.size(); ++i)
    first_row[i + 1] = first_row[i] + static_cast<std::size_t>(sets_[i].chunks) * kTile;
  gathered_.assign(2 * first_row.back() * static_cast<std::size_t>(ld), 0.0f);
  const auto n = static_cast<std::ptrdiff_t>(sets_.size());
#pragma omp parallel for schedule(dynamic, 1)
  for (std::ptrdiff_t i = 0; i < n; ++i) {
    HeadColumns& c = sets_[static_cast<std::size_t>(i)];
    float* k = gathered_.data() + first_row[static_cast<std::size_t>(i)] * static_cast<std::size_t>(ld);
    float* v = k + first_row.back() * static_cast<std::size_t>(ld);
    for (std::size_t j = 0; j < c.rows.size(); ++j) {
      const auto from = (static_cast<std::ptrdiff_t>(c.kv_head) * kv_rows + c.rows[j]) * ld;
      std::copy_n(k_rows + from, ld, k + static_cast<std::ptrdiff_t>(j) * ld);
      std::copy_n(v_rows + from, ld, v + static_cast<std::ptrdiff_t>(j) * ld);
    }
    c.k = k;
    c.v = v;
    mark_on_grid(tasks[static_cast<std::size_t>(c.task)], c);
  }
}

}  // namespace fulcrum::kernels

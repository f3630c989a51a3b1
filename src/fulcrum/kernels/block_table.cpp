#include "fulcrum/kernels/block_table.hpp"

#include "fulcrum/core/error.hpp"
#include "fulcrum/kernels/columns.hpp"
#include "fulcrum/kernels/tiles.hpp"

#include <algorithm>
#include <bit>
#include <limits>
#include <optional>

namespace fulcrum::kernels {
namespace {

constexpr Tokens kTile = kBlockTableTile;
static_assert(kTile == kColumnChunk && kTile == simd::kTile, "one tile size for the grid, the columns and the bits");

std::int32_t narrow(Tokens value) {
  FULCRUM_CHECK(value >= 0 && value <= std::numeric_limits<std::int32_t>::max(), "buffer row {} exceeds int32", value);
  return static_cast<std::int32_t>(value);
}

class Builder {
 public:
  explicit Builder(BlockTable& t) : t_(t) {}

  std::int32_t add_block(Tokens row, Tokens keys, std::int64_t gather) {
    t_.block_row.push_back(gather < 0 ? narrow(row) : -1);
    t_.block_keys.push_back(narrow(keys));
    t_.block_gather.push_back(gather);
    return narrow(static_cast<Tokens>(t_.blocks() - 1));
  }
  std::int32_t add_tile(Tokens row, Tokens rows, int h0, int h1) {
    t_.tile_row.push_back(narrow(row));
    t_.tile_rows.push_back(narrow(rows));
    t_.tile_head_begin.push_back(h0);
    t_.tile_head_end.push_back(h1);
    return narrow(static_cast<Tokens>(t_.tiles() - 1));
  }
  /// An entry whose rows see every key of the block.
  void add_full(std::int32_t tile, std::int32_t block) { add(tile, block, -1); }
  /// An entry with one bit word per row (64 words, rows past the tile's zero); none if no bit is set.
  template <class RowBits>
  void add_partial(std::int32_t tile, std::int32_t block, Tokens rows, RowBits&& row_bits) {
    const auto offset = static_cast<std::int64_t>(t_.bits.size());
    std::uint64_t any = 0;
    for (Tokens i = 0; i < kTile; ++i) any |= t_.bits.emplace_back(i < rows ? row_bits(i) : 0);
    if (any == 0) {
      t_.bits.resize(static_cast<std::size_t>(offset));
      return;
    }
    add(tile, block, offset);
  }

 private:
  void add(std::int32_t tile, std::int32_t block, std::int64_t bits) {
    t_.entry_tile.push_back(tile);
    t_.entry_block.push_back(block);
    t_.entry_bits.push_back(bits);
  }
  BlockTable& t_;
};

/// One task's entries under one run of heads sharing `mask`: the grid's tiles (skipping 16-tile spans the
/// grid mask leaves empty, as the CPU kernels do), then the gathered columns' chunks.
void add_run(Builder& b, BlockTable& t, const AttentionTask& task, const MaskSpec& mask, int h0, int h1,
             std::int32_t first_block) {
  const MaskColumns split = mask.split_columns(task.doc_len);
  std::optional<HeadColumns> columns = head_columns(task, split, mask, h0, h1, 0);
  std::int32_t first_chunk = 0;
  if (columns) {
    mark_on_grid(task, *columns);
    const auto gather = static_cast<std::int64_t>(t.gather.size());
    for (Tokens row : columns->rows) t.gather.push_back(narrow(row));
    for (int c = 0; c < columns->chunks; ++c) {
      const Tokens keys = std::min<Tokens>(kTile, static_cast<Tokens>(columns->rows.size()) - c * kTile);
      const std::int32_t id = b.add_block(0, keys, gather + c * kTile);
      if (c == 0) first_chunk = id;
    }
  }
  const MaskSpec& grid = columns ? columns->rest : mask;
  int query_tile = 0;
  for (const RowSpan& span : task.queries) {
    for (Tokens offset = 0; offset < span.count; offset += kTile, ++query_tile) {
      const Tokens nq = std::min(kTile, span.count - offset);
      const Range queries = positions(span, offset, nq);
      const std::int32_t tile = b.add_tile(span.row + offset, nq, h0, h1);
      for (Tokens key_offset = 0; key_offset < task.keys.count; key_offset += kTile) {
        if (skip_span(grid, queries, task.keys, true, key_offset, task.doc_len)) {
          key_offset += kSkipSpan - kTile;
          continue;
        }
        const Tokens nk = std::min(kTile, task.keys.count - key_offset);
        const Range keys = positions(task.keys, key_offset, nk);
        TileKind kind = grid.classify(queries, keys, task.doc_len);
        if (kind == TileKind::kEmpty) continue;
        if (columns) kind = mask.classify(queries, keys, task.doc_len);  // the columns in this tile too
        const std::int32_t block = first_block + static_cast<std::int32_t>(key_offset / kTile);
        if (kind == TileKind::kFull) {
          b.add_full(tile, block);
        } else {
          b.add_partial(tile, block, nq, [&](Tokens i) {
            return mask.row_bits(queries.begin + i, keys.begin, static_cast<int>(nk), task.doc_len);
          });
        }
      }
      if (!columns) continue;
      for (int c = 0; c < columns->chunks; ++c) {
        b.add_partial(tile, first_chunk + c, nq, [&](Tokens i) {
          return columns->row_bits(query_tile, c, mask.source_position(queries.begin + i, task.doc_len));
        });
      }
    }
  }
}

}  // namespace

std::int64_t BlockTable::pairs() const {
  std::int64_t total = 0;
  for (std::size_t e = 0; e < entries(); ++e) {
    const auto tile = static_cast<std::size_t>(entry_tile[e]);
    std::int64_t n = 0;
    if (entry_bits[e] < 0) {
      n = std::int64_t{tile_rows[tile]} * block_keys[static_cast<std::size_t>(entry_block[e])];
    } else {
      for (Tokens i = 0; i < kTile; ++i) n += std::popcount(bits[static_cast<std::size_t>(entry_bits[e] + i)]);
    }
    total += n * (tile_head_end[tile] - tile_head_begin[tile]);
  }
  return total;
}

BlockTable block_table(std::span<const AttentionTask> tasks, int q_heads, Tokens q_rows, Tokens kv_rows) {
  validate_tasks(tasks, q_rows, kv_rows, q_heads);
  BlockTable t;
  Builder b(t);
  for (const AttentionTask& task : tasks) {
    const auto first_block = static_cast<std::int32_t>(t.blocks());
    for (Tokens offset = 0; offset < task.keys.count; offset += kTile)
      b.add_block(task.keys.row + offset, std::min(kTile, task.keys.count - offset), -1);
    for (const MaskRun& run : task.mask_runs()) {
      add_run(b, t, task, *run.mask, run.heads.first(), run.heads.last(q_heads), first_block);
    }
  }
  // Row pointers, and the entries again key-major (a counting sort by block, stable).
  t.tile_entries.assign(t.tiles() + 1, 0);
  t.block_entries.assign(t.blocks() + 1, 0);
  for (std::size_t e = 0; e < t.entries(); ++e) {
    ++t.tile_entries[static_cast<std::size_t>(t.entry_tile[e]) + 1];
    ++t.block_entries[static_cast<std::size_t>(t.entry_block[e]) + 1];
  }
  for (std::size_t i = 1; i < t.tile_entries.size(); ++i) t.tile_entries[i] += t.tile_entries[i - 1];
  for (std::size_t i = 1; i < t.block_entries.size(); ++i) t.block_entries[i] += t.block_entries[i - 1];
  t.key_order.assign(t.entries(), 0);
  std::vector<std::int64_t> next(t.block_entries.begin(), t.block_entries.end() - 1);
  for (std::size_t e = 0; e < t.entries(); ++e)
    t.key_order[static_cast<std::size_t>(next[static_cast<std::size_t>(t.entry_block[e])]++)] =
        static_cast<std::int64_t>(e);
  return t;
}

}  // namespace fulcrum::kernels

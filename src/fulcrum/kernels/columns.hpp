// Gathered columns (internal to the kernels): a vertical-slash mask's vertical columns computed as
// dense tiles of copied K/V rows, MTraining's and MInference's way. A column is one key that every later
// row sees; on the tile grid it makes a whole 64 x 64 tile of work (mostly masked away) for one key, so
// a mask with a few hundred columns turns most of its active tiles into such tiles. Gathered, 64
// columns share one tile.
//
// Each pair is computed once: a (query tile, key tile) that the mask without its columns (`rest`)
// leaves non-empty is computed on the grid under the full mask, columns included; the columns of every
// other key tile are computed gathered, where row q sees column c iff source(c) <= source(q).
#pragma once

#include "fulcrum/kernels/attention_task.hpp"

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace fulcrum::kernels {

/// Columns per gathered chunk: one dense tile (simd::kTile, checked in columns.cpp).
inline constexpr Tokens kColumnChunk = 64;

/// Query tiles of a task: 64 rows from each query range's first row, ranges in order.
int query_tile_count(const AttentionTask& task);
/// The index of the query tile that starts at `tile` (a tile of query_tiles or of the grid's loops).
int query_tile_index(const AttentionTask& task, const RowSpan& tile);

/// The gathered columns of one task under one mask (one q head, or every head of a kv group when the
/// task has one mask), for kv head `kv_head`.
struct HeadColumns {
  int task = 0;
  int kv_head = 0;
  int q_begin = 0, q_end = 0;   // the task's q heads this serves
  MaskSpec rest;                // the task's mask without its columns: what decides the grid's tiles
  std::vector<Tokens> rows;     // the columns' rows in the K/V buffers, in ascending source position
  std::vector<Tokens> sources;  // their source (original) positions, ascending
  int chunks = 0;               // 64-column chunks
  // [query tile][chunk]: bit j set where column 64 * chunk + j lies in a key tile that `rest` keeps for
  // that query tile (the grid computes it there), so the gathered tile skips it.
  std::vector<std::uint64_t> on_grid;
  const float* k = nullptr;  // the columns' K and V rows (head-major copies' rows), [chunks * 64][ld],
  const float* v = nullptr;  // zero past rows.size()

  /// Columns of `chunk` that a row of query tile `tile` whose source position is `source` sees here.
  std::uint64_t row_bits(int tile, int chunk, Tokens source) const;
  /// row_bits of the nq rows of query tile `tile` (source positions `row_sources`) into `bits`;
  /// whether any is set (else the chunk is skipped for this tile).
  bool tile_bits(int tile, int chunk, const Tokens* row_sources, Tokens nq, std::uint64_t* bits) const {
    std::uint64_t any = 0;
    for (Tokens i = 0; i < nq; ++i) any |= bits[i] = row_bits(tile, chunk, row_sources[i]);
    return any != 0;
  }
  /// Chunks that some row whose source position is at most `source` can see: [0, chunks_before(source)).
  int chunks_before(Tokens source) const;
};

/// The columns of `split` (`mask` split by split_columns) among `task`'s keys, for q heads [q_begin, q_end) and
/// kv head `kv_head`, with no K/V rows copied (k and v null; task 0) and on_grid not yet marked; nullopt when none
/// lies among its keys. CallColumns gathers each set's K/V; the GPU kernels' block table (block_table.hpp)
/// gathers by row index instead.
std::optional<HeadColumns> head_columns(const AttentionTask& task, const MaskColumns& split, const MaskSpec& mask,
                                        int q_begin, int q_end, int kv_head);
/// Fills c.on_grid: for every query tile of `task`, the columns whose key tile `c.rest` keeps there.
void mark_on_grid(const AttentionTask& task, HeadColumns& c);

/// Every gathered column set of one kernel call.
class CallColumns {
 public:
  /// `k_rows`, `v_rows`: the call's head-major fp32 K and V (ld floats a row, kv_rows rows a head).
  CallColumns(std::span<const AttentionTask> tasks, int q_heads, int kv_heads, const float* k_rows, const float* v_rows,
              Tokens kv_rows, long ld);

  /// The columns of task `task` under q head `head`'s mask; null when that mask has none among the
  /// task's keys (the grid then computes everything under the mask as it is).
  const HeadColumns* of(int task, int head) const {
    const int i = index_[static_cast<std::size_t>(task) * static_cast<std::size_t>(q_heads_) + head];
    return i < 0 ? nullptr : &sets_[static_cast<std::size_t>(i)];
  }
  std::span<const HeadColumns> sets() const { return sets_; }
  /// The mask that decides whether the grid computes a tile: the rest when there are gathered columns.
  const MaskSpec& grid_mask(int task, int head, const MaskSpec& mask) const {
    const HeadColumns* c = of(task, head);
    return c == nullptr ? mask : c->rest;
  }

 private:
  int q_heads_;
  std::vector<HeadColumns> sets_;
  std::vector<int> index_;       // [task][q head] -> sets_ index, -1 for none
  std::vector<float> gathered_;  // not simd.hpp's aligned Floats: this header stays free of vector types
};

}  // namespace fulcrum::kernels

// BlockTable: the work of one fused attention call as flat index arrays, for block-sparse GPU kernels
// (fulcrum.torch's Triton kernels) that cannot ask a MaskSpec anything. Built once per plan instruction
// on the host, from the same mask questions the CPU kernels ask (classify per 64 x 64 tile, row_bits per
// row of a partial tile, gathered vertical columns: columns.hpp), so the GPU kernels compute exactly the
// pairs the CPU kernels compute, and each pair once.
//
//  - Query tiles: up to 64 consecutive buffer rows of one query span, for a run of q heads sharing one
//    mask. A forward / dQ program owns one (query tile, q head) and writes its rows alone.
//  - Key blocks: up to 64 consecutive key rows of a task, or a chunk of up to 64 gathered column rows
//    (`gather`). A dK/dV program owns one (key block, kv head); blocks of different tasks may hold the
//    same rows, so those programs add their result into dK/dV (atomically on a GPU).
//  - Entries: the (query tile, key block) pairs with a visible pair, query-major (`tile_entries` is the
//    CSR row pointer); `key_order` lists the same entries key-major (`block_entries` its row pointer).
//    An entry's `bits` is -1 when every pair of the tile is visible, else the offset of its 64 row words
//    in `bits` (bit j of word i: row i sees key j of the block).
#pragma once

#include "fulcrum/kernels/attention_task.hpp"

#include <cstdint>
#include <span>
#include <vector>

namespace fulcrum::kernels {

/// Rows of a query tile and keys of a key block (one bit word per row).
inline constexpr Tokens kBlockTableTile = 64;

struct BlockTable {
  // Query tiles.
  std::vector<std::int32_t> tile_row;         // first buffer row
  std::vector<std::int32_t> tile_rows;        // rows, 1..64
  std::vector<std::int32_t> tile_head_begin;  // q heads [begin, end) under the tile's mask
  std::vector<std::int32_t> tile_head_end;
  std::vector<std::int64_t> tile_entries;  // tiles + 1: entries [tile_entries[t], tile_entries[t + 1])
  // Key blocks.
  std::vector<std::int32_t> block_row;      // first buffer row of a contiguous block; -1 for a gathered one
  std::vector<std::int32_t> block_keys;     // keys, 1..64
  std::vector<std::int64_t> block_gather;   // offset of its rows in `gather`; -1 for a contiguous block
  std::vector<std::int64_t> block_entries;  // blocks + 1: key_order[block_entries[b] .. block_entries[b + 1])
  std::vector<std::int32_t> gather;         // gathered blocks' buffer rows
  // Entries, query-major.
  std::vector<std::int32_t> entry_tile;
  std::vector<std::int32_t> entry_block;
  std::vector<std::int64_t> entry_bits;  // -1: every pair visible; else offset of 64 words in `bits`
  std::vector<std::int64_t> key_order;   // entry indices, key-block-major
  std::vector<std::uint64_t> bits;

  std::size_t tiles() const { return tile_row.size(); }
  std::size_t blocks() const { return block_keys.size(); }
  std::size_t entries() const { return entry_block.size(); }
  /// Visible pairs of every entry (tile rows x block keys, or the set bits), per q head of its tile:
  /// what the table computes, to be checked against the masks' own pair counts.
  std::int64_t pairs() const;
};

/// The block table of `tasks` (one fused call over q_heads query heads, Q buffers of q_rows rows, K/V of kv_rows)
/// under their masks. The tasks are checked first as the CPU kernels check theirs (validate_tasks: rows inside the
/// buffers, heads and masks valid, one writer per (row, head), which the GPU kernels' plain stores rely on).
BlockTable block_table(std::span<const AttentionTask> tasks, int q_heads, Tokens q_rows, Tokens kv_rows);

}  // namespace fulcrum::kernels

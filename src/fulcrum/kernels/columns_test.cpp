// Gathered columns: every visible (row, column) pair is computed exactly once, on the grid (the
// column's key tile is one the rest of the mask keeps for the row's query tile) or gathered (row_bits
// has the column's bit), and no invisible pair is computed.
#include "fulcrum/kernels/columns.hpp"

#include "fulcrum/core/random.hpp"
#include "fulcrum/kernels/kernel_test_cases.hpp"

#include <gtest/gtest.h>

namespace fulcrum::kernels {
namespace {

constexpr Tokens kTile = kColumnChunk;

TEST(GatheredColumns, EveryVisibleColumnPairIsComputedExactlyOnce) {
  Rng rng(91);
  const Tokens len = 1088;
  for (const MaskSpec& mask : testing::many_column_masks(rng, len)) {
    SCOPED_TRACE(mask.to_string().substr(0, 120));
    // Queries: a head+tail pair of rows at an offset in the buffer; keys from inside the document.
    AttentionTask task;
    task.doc_len = len;
    task.mask = mask;
    task.queries = {RowSpan{10, 0, 300}, RowSpan{400, 700, len - 700}};
    task.keys = RowSpan{5, 64 * 3 + 7, len - (64 * 3 + 7)};
    const std::vector<float> kv(static_cast<std::size_t>((task.keys.row + task.keys.count) * kTile), 1.0f);
    const CallColumns call(std::span(&task, 1), 2, 1, kv.data(), kv.data(), task.keys.row + task.keys.count, kTile);
    const HeadColumns* c = call.of(0, 1);
    ASSERT_NE(c, nullptr);
    ASSERT_EQ(c, call.of(0, 0)) << "one mask: both heads of the kv group share the set";
    ASSERT_GT(c->chunks, 1);
    for (std::size_t j = 0; j < c->rows.size(); ++j) {
      const Tokens slot = c->rows[j] - task.keys.row + task.keys.position;
      ASSERT_EQ(c->sources[j], mask.source_position(slot, len));
    }
    int tile = 0;
    for (const RowSpan& range : task.queries) {
      for (Tokens offset = 0; offset < range.count; offset += kTile, ++tile) {
        const Range queries{range.position + offset, range.position + std::min(range.count, offset + kTile)};
        ASSERT_EQ(query_tile_index(task, RowSpan{range.row + offset, queries.begin, queries.size()}), tile);
        for (Tokens q = queries.begin; q < queries.end; ++q) {
          for (std::size_t j = 0; j < c->rows.size(); ++j) {
            const Tokens slot = c->rows[j] - task.keys.row + task.keys.position;
            const Tokens key_tile = (c->rows[j] - task.keys.row) / kTile;
            const Tokens first = task.keys.position + key_tile * kTile;
            const Range keys{first, std::min(first + kTile, task.keys.position + task.keys.count)};
            const bool on_grid = c->rest.classify(queries, keys, len) != TileKind::kEmpty;
            const auto chunk = static_cast<int>(j / kTile);
            const bool gathered = ((c->row_bits(tile, chunk, mask.source_position(q, len)) >> (j % kTile)) & 1u) != 0;
            ASSERT_FALSE(on_grid && gathered) << "q " << q << " column " << slot << " computed twice";
            if (mask.allows(q, slot, len)) {
              ASSERT_TRUE(on_grid || gathered) << "q " << q << " column " << slot << " never computed";
            } else {
              ASSERT_FALSE(gathered) << "q " << q << " column " << slot << " computed but invisible";
            }
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace fulcrum::kernels

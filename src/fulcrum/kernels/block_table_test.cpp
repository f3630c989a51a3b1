// The GPU kernels' block table computes exactly the visible pairs, each once: for random problems under
// every mask kind (and per-head masks mixing kinds, head ranges cut, several tasks sharing key rows),
// expanding every entry into (q head, buffer row, key row) triples gives each visible triple of every
// task exactly once and nothing else.
#include "fulcrum/kernels/block_table.hpp"

#include "fulcrum/core/random.hpp"
#include "fulcrum/kernels/kernel_test_cases.hpp"

#include <gtest/gtest.h>

#include <vector>

namespace fulcrum::kernels {
namespace {

// Counts per (q head, query buffer row, key buffer row), dense: rows x rows per head.
struct Triples {
  Tokens rows = 0;
  std::vector<int> count;
  Triples(int heads, Tokens rows_) : rows(rows_), count(static_cast<std::size_t>(heads * rows_ * rows_), 0) {}
  void add(int h, Tokens q, Tokens k) { ++count[static_cast<std::size_t>((h * rows + q) * rows + k)]; }
};

// Every visible triple of the tasks, counted (a triple twice would be a plan error, not a table one).
Triples visible_triples(const std::vector<AttentionTask>& tasks, int q_heads, Tokens rows) {
  Triples out(q_heads, rows);
  for (const AttentionTask& task : tasks) {
    for (int h = task.heads.first(); h < task.heads.last(q_heads); ++h) {
      for (const RowSpan& span : task.queries) {
        for (Tokens i = 0; i < span.count; ++i) {
          for (Tokens j = 0; j < task.keys.count; ++j) {
            if (task.mask_of(h).allows(span.position + i, task.keys.position + j, task.doc_len))
              out.add(h, span.row + i, task.keys.row + j);
          }
        }
      }
    }
  }
  return out;
}

Triples table_triples(const BlockTable& t, int q_heads, Tokens rows) {
  Triples out(q_heads, rows);
  for (std::size_t e = 0; e < t.entries(); ++e) {
    const auto tile = static_cast<std::size_t>(t.entry_tile[e]);
    const auto block = static_cast<std::size_t>(t.entry_block[e]);
    for (int h = t.tile_head_begin[tile]; h < t.tile_head_end[tile]; ++h) {
      for (Tokens i = 0; i < t.tile_rows[tile]; ++i) {
        for (Tokens j = 0; j < t.block_keys[block]; ++j) {
          const std::uint64_t word =
              t.entry_bits[e] < 0 ? ~std::uint64_t{0} : t.bits[static_cast<std::size_t>(t.entry_bits[e] + i)];
          if (((word >> j) & 1) == 0) continue;
          const Tokens key = t.block_gather[block] < 0 ? t.block_row[block] + j
                                                       : t.gather[static_cast<std::size_t>(t.block_gather[block] + j)];
          out.add(h, t.tile_row[tile] + i, key);
        }
      }
    }
  }
  return out;
}

void expect_exact(const testing::Problem& p) {
  const BlockTable t = block_table(p.tasks, p.shape.q_heads, p.q_rows, p.kv_rows);
  const Triples want = visible_triples(p.tasks, p.shape.q_heads, p.q_rows);
  const Triples got = table_triples(t, p.shape.q_heads, p.q_rows);
  std::int64_t pairs = 0;
  for (int n : want.count) pairs += n;
  EXPECT_EQ(t.pairs(), pairs);
  EXPECT_TRUE(got.count == want.count) << "some (head, row, key) is computed a different number of times than seen";
  // Row pointers: query-major entries are grouped by tile; key_order lists every entry once, by block.
  ASSERT_EQ(t.tile_entries.back(), static_cast<std::int64_t>(t.entries()));
  for (std::size_t tile = 0; tile < t.tiles(); ++tile) {
    for (auto e = t.tile_entries[tile]; e < t.tile_entries[tile + 1]; ++e)
      ASSERT_EQ(t.entry_tile[static_cast<std::size_t>(e)], static_cast<std::int32_t>(tile));
  }
  for (std::size_t block = 0; block < t.blocks(); ++block) {
    for (auto i = t.block_entries[block]; i < t.block_entries[block + 1]; ++i)
      ASSERT_EQ(t.entry_block[static_cast<std::size_t>(t.key_order[static_cast<std::size_t>(i)])],
                static_cast<std::int32_t>(block));
  }
}

class BlockTableEveryMask : public ::testing::TestWithParam<int> {};

TEST_P(BlockTableEveryMask, ComputesEveryVisiblePairOnce) {
  Rng rng(300 + static_cast<std::uint64_t>(GetParam()));
  const MaskKind kind = all_mask_kinds()[static_cast<std::size_t>(GetParam())];
  for (int trial = 0; trial < 3; ++trial) {
    const Tokens len = rng.uniform_int(50, 400);
    const MaskSpec mask = testing::random_mask(rng, kind, len);
    SCOPED_TRACE(mask.to_string().substr(0, 120));
    const AttentionShape shape{4, 2, 16, 0};
    testing::Problem p = testing::make_problem(rng, shape, {len, rng.uniform_int(1, 200)}, mask, 3, trial > 0, false);
    expect_exact(p);
  }
}

INSTANTIATE_TEST_SUITE_P(Kinds, BlockTableEveryMask, ::testing::Range(0, testing::mask_kind_count()));

TEST(BlockTable, PerHeadMasksAndManyGatheredColumns) {
  Rng rng(17);
  std::vector<MaskSpec> masks = testing::every_mask(rng, 256);
  for (const MaskSpec& m : testing::many_column_masks(rng, 1088)) masks.push_back(m);
  const AttentionShape shape{6, 2, 16, 0};
  testing::Problem p = testing::make_problem(rng, shape, {1088}, MaskSpec::causal(), 3, true, false);
  testing::split_heads(rng, p, masks, true);
  expect_exact(p);
}

}  // namespace
}  // namespace fulcrum::kernels

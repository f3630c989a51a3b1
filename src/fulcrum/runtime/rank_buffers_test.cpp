// RankBuffers: a slice of some heads is `rows` strided runs, gathered into and scattered out of one block
// exactly (the executor's messages and merges of head-sliced slices), at any row count.
#include "fulcrum/runtime/rank_buffers.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

namespace fulcrum::runtime {
namespace {

// Element e of row r of buffer b holds 1000 b + 100 r + e (as a float, exact).
void fill(RankBuffers& buffers, const Program& p) {
  for (int b = 0; b < static_cast<int>(p.buffers.size()); ++b) {
    auto* x = reinterpret_cast<float*>(buffers.row({b, 0, p.buffers[b].rows}));
    const auto width = buffers.row_bytes(b) / sizeof(float);
    for (Tokens r = 0; r < p.buffers[b].rows; ++r) {
      for (std::size_t e = 0; e < width; ++e) x[r * width + e] = static_cast<float>(1000 * b + 100 * r + e);
    }
  }
}

TEST(RankBuffers, HeadSlicesGatherAndScatterTheirHeadsOnly) {
  const HeadLayout heads{8, 2, 4, 4};  // Q rows: 8 heads x 4 values; K rows 2 x 4; LSE rows 8 x 1
  Program p;
  p.buffers = {{"q", Field::kQ, 3, BufferInit::kInput, false},
               {"k", Field::kK, 3, BufferInit::kInput, false},
               {"lse", Field::kLse, 3, BufferInit::kInput, false}};
  RankBuffers buffers(p, heads);
  fill(buffers, p);
  struct Case {
    Slice slice;
    std::vector<float> want;  // the gathered values
  };
  const std::vector<Case> cases = {
      // Q heads [2, 4) of rows 1-2: values 8..15 of each row.
      {{0, 1, 2, {2, 4}}, {108, 109, 110, 111, 112, 113, 114, 115, 208, 209, 210, 211, 212, 213, 214, 215}},
      // One row of kv head 1: the second half of K's row, not its first (a one-row slice is contiguous but
      // starts at its head).
      {{1, 2, 1, {1, 2}}, {1204, 1205, 1206, 1207}},
      // LSE: one value per q head.
      {{2, 0, 2, {5, 8}}, {2005, 2006, 2007, 2105, 2106, 2107}},
      // Whole rows.
      {{1, 0, 1, {}}, {1000, 1001, 1002, 1003, 1004, 1005, 1006, 1007}},
  };
  for (const auto& c : cases) {
    ASSERT_EQ(buffers.bytes(c.slice), c.want.size() * sizeof(float));
    std::vector<float> gathered(c.want.size());
    buffers.gather(c.slice, reinterpret_cast<std::byte*>(gathered.data()));
    EXPECT_EQ(gathered, c.want) << "buffer " << c.slice.buffer;
    // Scattering negated values changes exactly the slice's bytes.
    std::vector<float> before(buffers.row_bytes(c.slice.buffer) / sizeof(float) * 3);
    std::memcpy(before.data(), buffers.row({c.slice.buffer, 0, 3}), before.size() * sizeof(float));
    std::vector<float> negated = gathered;
    for (auto& x : negated) x = -x;
    buffers.scatter(c.slice, reinterpret_cast<const std::byte*>(negated.data()));
    const auto* after = reinterpret_cast<const float*>(buffers.row({c.slice.buffer, 0, 3}));
    std::size_t changed = 0;
    for (std::size_t i = 0; i < before.size(); ++i) changed += after[i] != before[i] ? 1 : 0;
    EXPECT_EQ(changed, c.want.size()) << "buffer " << c.slice.buffer;
    buffers.gather(c.slice, reinterpret_cast<std::byte*>(gathered.data()));
    EXPECT_EQ(gathered, negated);
    buffers.scatter(c.slice, reinterpret_cast<const std::byte*>(c.want.data()));
  }
  // A dense view of a head slice is the gathered slice, [rows][its heads][dim]; of whole rows, the buffer.
  std::vector<std::byte> scratch;
  const auto dense = buffers.dense_view<float>({0, 1, 2, {2, 4}}, scratch);
  EXPECT_EQ(dense.rows, 2);
  EXPECT_EQ(dense.heads, 2);
  EXPECT_EQ(dense.dim, 4);
  EXPECT_EQ(*dense.at(1, 1), 212.0f);
  std::vector<std::byte> unused;
  EXPECT_EQ(buffers.dense_view<float>({0, 0, 3, {}}, unused).data, buffers.view<float>(0).data);
  EXPECT_TRUE(unused.empty());
}

}  // namespace
}  // namespace fulcrum::runtime

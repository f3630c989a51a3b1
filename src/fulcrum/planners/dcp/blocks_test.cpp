#include "fulcrum/planners/dcp/blocks.hpp"

#include "fulcrum/core/error.hpp"
#include "fulcrum/cost/attention_cost.hpp"
#include "fulcrum/workload/mask_test_cases.hpp"

#include <gtest/gtest.h>

#include <vector>

namespace fulcrum::dcp {
namespace {

Batch one_document(Tokens length, MaskSpec mask) { return pack_batch({Document{0, length, mask}}, 1, length); }

TEST(DcpBlocks, FlopsOfTheBlocksAddUpToTheDocumentForEveryMask) {
  const auto model = model_shape_preset("tiny");
  const std::vector<MaskSpec> masks =
      testing::with_every_kind({MaskSpec::causal(), MaskSpec::full(), MaskSpec::lambda(64, 700),
                                MaskSpec::causal_blockwise(256, 2), MaskSpec::shared_question(4, 20),
                                MaskSpec::sliding_window(300), MaskSpec::vertical_slash({0, 5, 900}, {0, 1, 333}),
                                MaskSpec::block_sparse(128, {{0, 0}, {3, 1}, {9, 2}, {9, 9}})});
  for (const auto& mask : masks) {
    for (Tokens block : {100, 256, 1000}) {
      const auto batch = one_document(2500, mask);
      const auto blocks = make_blocks(batch, block, model);
      EXPECT_EQ(blocks.data.size(), static_cast<std::size_t>((2500 + block - 1) / block));
      double flops = 0;
      for (const auto& c : blocks.compute) {
        flops += c.flops;
        const auto& q = blocks.data[c.q_block].tokens;
        const auto& k = blocks.data[c.kv_block].tokens;
        EXPECT_FALSE(mask.keys_needed(q, k, 2500).empty()) << mask.to_string() << ": an empty tile was kept";
      }
      const std::array<Range, 1> all{Range{0, 2500}};
      EXPECT_NEAR(flops, attention_forward_flops(model, mask, all, {0, 2500}, 2500), 1e-6 * flops + 1)
          << mask.to_string() << " block " << block;
    }
  }
  EXPECT_THROW(make_blocks(one_document(10, MaskSpec::causal()), 0, model), Error);
}

TEST(DcpBlocks, CausalTilesAreTheLowerTriangle) {
  const auto blocks = make_blocks(one_document(1000, MaskSpec::causal()), 250, model_shape_preset("tiny"));
  EXPECT_EQ(blocks.compute.size(), 10u);  // 4 diagonal + 6 below
  for (const auto& c : blocks.compute) EXPECT_LE(c.kv_block, c.q_block);
}

TEST(DcpBlocks, HypergraphNetsCarryTheBytesThatMove) {
  const auto model = model_shape_preset("tiny");
  const auto blocks = make_blocks(one_document(512, MaskSpec::causal()), 256, model);
  const auto h = placement_hypergraph(blocks, model);
  ASSERT_EQ(h.vertices(), 3 + 2);  // 3 tiles, 2 data blocks
  ASSERT_EQ(h.nets(), 4 + 1);      // Q/O and K/V per data block, tiles (1, 0)-(1, 1) neighbours
  const auto bytes = token_bytes(model);
  // Everything on one device moves nothing; moving the off-diagonal tile away from both blocks sends
  // block 0's K/V there and block 1's Q there and its O+LSE back, and breaks row 1 into two runs.
  EXPECT_EQ(connectivity_cost(h, std::vector<int>{0, 0, 0, 0, 0}, 2), 0.0);
  const int tile10 = 1;  // (q 1, kv 0), in (q, kv) order: (0,0), (1,0), (1,1)
  std::vector<int> parts{0, 0, 0, 0, 0};
  parts[tile10] = 1;
  EXPECT_NEAR(connectivity_cost(h, parts, 2), 256 * (bytes.kv + 2 * (bytes.q + bytes.output())), 1e-6);
}

}  // namespace
}  // namespace fulcrum::dcp

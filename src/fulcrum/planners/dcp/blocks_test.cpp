#include "fulcrum/planners/dcp/blocks.hpp"

#include "fulcrum/core/error.hpp"
#include "fulcrum/cost/attention_cost.hpp"
#include "fulcrum/workload/limits.hpp"
#include "fulcrum/workload/mask_test_cases.hpp"

#include <gtest/gtest.h>

#include <string>
#include <tuple>
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

// count_blocks sizes a batch without making its blocks (the planner refuses batches beyond its size
// from it, before any work): the same computation blocks as make_blocks, for every mask.
TEST(DcpBlocks, CountBlocksCountsWhatMakeBlocksMakes) {
  const auto model = model_shape_preset("tiny");
  const std::vector<MaskSpec> masks =
      testing::with_every_kind({MaskSpec::causal(), MaskSpec::full(), MaskSpec::lambda(64, 700),
                                MaskSpec::causal_blockwise(256, 2), MaskSpec::shared_question(4, 20),
                                MaskSpec::sliding_window(300), MaskSpec::vertical_slash({0, 5, 900}, {0, 1, 333}),
                                MaskSpec::block_sparse(128, {{0, 0}, {3, 1}, {9, 2}, {9, 9}})});
  for (const auto& mask : masks) {
    const Tokens length = 2560 * mask.length_multiple();
    const Batch batch = pack_batch({Document{0, length, mask}, Document{1, length / 2, mask}}, 2, length);
    for (Tokens block : {100, 256, 1000}) {
      for (int head_blocks : {1, 2}) {
        const auto counts = count_blocks(batch, block, head_blocks);
        EXPECT_EQ(counts.compute, static_cast<double>(make_blocks(batch, block, model, head_blocks).compute.size()))
            << mask.to_string() << " block " << block << " head blocks " << head_blocks;
        EXPECT_EQ(counts.longest_document, (length + block - 1) / block);
      }
    }
  }
}

// Past a bound counting stops, so sizing a batch far beyond DCP's is as quick as one just beyond: the
// largest document at one token per block (2^30 block rows) is sized from its length alone, and a count
// past the computation blocks' bound ends within the row that passed it.
TEST(DcpBlocks, CountBlocksStopsPastItsBounds) {
  const Batch largest = pack_batch({Document{0, kMaxDocumentTokens, MaskSpec::causal()}}, 4, kMaxDocumentTokens / 4);
  const auto huge = count_blocks(largest, 1, 1, {1e12, 256, true});
  EXPECT_FALSE(huge.complete);
  EXPECT_EQ(huge.longest_document, kMaxDocumentTokens);
  EXPECT_EQ(huge.compute, 0.0);
  // 40 causal documents of 10 blocks: 55 tiles each, 2,200 in all; one block row adds at most 10.
  std::vector<Document> docs;
  for (int d = 0; d < 40; ++d) docs.push_back({d, 1000, MaskSpec::causal()});
  const Batch batch = pack_batch(docs, 4, 10000);
  EXPECT_EQ(count_blocks(batch, 100).compute, 2200.0);
  const auto at_bound = count_blocks(batch, 100, 1, {2200, 10, true});
  EXPECT_TRUE(at_bound.complete);
  EXPECT_EQ(at_bound.compute, 2200.0);
  const auto past = count_blocks(batch, 100, 1, {1000, 10, true});
  EXPECT_FALSE(past.complete);
  EXPECT_GT(past.compute, 1000.0);
  EXPECT_LE(past.compute, 1010.0);
  EXPECT_FALSE(count_blocks(batch, 100, 1, {2200, 9, true}).complete);
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

// A model whose 8 q heads form 4 GQA groups, so 1, 2 and 4 head blocks hold whole groups.
ModelShape four_groups() { return {"four-groups", 2, 512, 8, 4, 64, 688, 2}; }

TEST(DcpBlocks, HeadBlocksSplitEveryTileIntoEqualRangesOfWholeGroups) {
  const auto model = four_groups();
  const auto batch = one_document(1000, MaskSpec::lambda(16, 300));
  const auto whole = make_blocks(batch, 128, model);
  for (int h : {2, 4}) {
    const auto blocks = make_blocks(batch, 128, model, h);
    ASSERT_EQ(blocks.compute.size(), whole.compute.size() * h);
    ASSERT_EQ(blocks.data.size(), whole.data.size());
    for (std::size_t i = 0; i < blocks.compute.size(); ++i) {
      const auto& c = blocks.compute[i];
      const HeadRange heads = blocks.heads(c);
      EXPECT_EQ(heads.begin, c.head_block * 8 / h);
      EXPECT_EQ(heads.end, (c.head_block + 1) * 8 / h);
      if (i > 0) {
        const auto& p = blocks.compute[i - 1];
        EXPECT_TRUE(std::tuple(p.q_block, p.head_block, p.kv_block) < std::tuple(c.q_block, c.head_block, c.kv_block))
            << "block " << i << " out of (q, head block, kv) order";
      }
    }
    // Each head block of a tile carries its share of the tile's FLOPs.
    for (const auto& w : whole.compute) {
      int found = 0;
      for (const auto& c : blocks.compute) {
        if (c.q_block != w.q_block || c.kv_block != w.kv_block) continue;
        ++found;
        EXPECT_DOUBLE_EQ(c.flops * h, w.flops);
      }
      EXPECT_EQ(found, h);
    }
  }
  EXPECT_TRUE(whole.heads(whole.compute[0]).all());  // one head block: tasks without a head range
}

TEST(DcpBlocks, HeadBlocksMustHoldWholeGqaGroups) {
  const auto model = four_groups();
  for (int h : {1, 2, 4}) EXPECT_NO_THROW(check_head_blocks(h, model)) << h;
  for (int h : {3, 8, 0}) {
    try {
      check_head_blocks(h, model);
      ADD_FAILURE() << h << " head blocks accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kBadInput);
      EXPECT_NE(
          std::string(e.what()).find(fmt::format("dcp-head-blocks = {}: must divide the model's kv_heads = 4", h)),
          std::string::npos)
          << e.what();
      EXPECT_NE(std::string(e.what()).find("one of 1, 2, 4"), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(make_blocks(one_document(100, MaskSpec::causal()), 32, model, 3), Error);
}

// With head blocks a net carries only its heads' bytes: moving one head block of the off-diagonal tile
// away costs that head block's share of block 0's K/V and of block 1's Q + O, and the break in its
// own row run, but nothing for the other head block.
TEST(DcpBlocks, HeadBlockNetsCarryOnlyTheirHeadsBytes) {
  const auto model = four_groups();
  const int h = 2;
  const auto blocks = make_blocks(one_document(512, MaskSpec::causal()), 256, model, h);
  const auto g = placement_hypergraph(blocks, model);
  ASSERT_EQ(g.vertices(), 6 + 2);  // 3 tiles x 2 head blocks, 2 data blocks
  ASSERT_EQ(g.nets(), 8 + 2);      // Q/O and K/V per data block and head block; row 1's neighbours per head block
  // (q, head block, kv) order: (0,0,0), (0,1,0), (1,0,0), (1,0,1), (1,1,0), (1,1,1).
  const int tile10_heads1 = 4;
  ASSERT_EQ(blocks.compute[tile10_heads1].q_block, 1);
  ASSERT_EQ(blocks.compute[tile10_heads1].kv_block, 0);
  ASSERT_EQ(blocks.compute[tile10_heads1].head_block, 1);
  std::vector<int> parts(8, 0);
  EXPECT_EQ(connectivity_cost(g, parts, 2), 0.0);
  parts[tile10_heads1] = 1;
  const auto row = token_bytes(model);
  const auto share = head_block_token_bytes(model, h);
  EXPECT_DOUBLE_EQ(share.q + share.kv + share.output(), (row.q + row.kv + row.output()) / h);
  EXPECT_NEAR(connectivity_cost(g, parts, 2), 256 * (share.kv + 2 * (share.q + share.output())), 1e-6);
  // The data blocks still weigh every head: memory is whole rows.
  EXPECT_DOUBLE_EQ(g.weight(6, 1), 256 * (row.q + row.kv + row.output()));
}

}  // namespace
}  // namespace fulcrum::dcp

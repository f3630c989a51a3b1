#include "fulcrum/planners/baselines/static_cp.hpp"

#include "fulcrum/cost/attention_cost.hpp"
#include "fulcrum/plan/compile.hpp"
#include "fulcrum/plan/program_verify.hpp"
#include "fulcrum/plan/stats.hpp"
#include "fulcrum/plan/verify.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

namespace fulcrum {
namespace {

// The shared validation wants the DistCA granularity within the 100 tokens per rank used here.
PlannerOptions tiny_options() {
  PlannerOptions o;
  o.model = model_shape_preset("tiny");
  return o;
}

// One causal document of 4 x 100 tokens on 4 ranks.
Batch one_long_document() { return pack_batch({Document{0, 400, MaskSpec::causal()}}, 4, 100); }

TEST(StaticCp, RingSendsEveryChunkToEveryRankWhateverTheMaskNeeds) {
  const auto o = tiny_options();
  const Batch batch = one_long_document();
  const Assignment a = make_planner("ring", o)->plan(batch);
  ASSERT_TRUE(verify(a, batch).ok()) << verify(a, batch).summary();
  // Causal: rank 0 needs no other chunk, yet all 3 others reach it; 4 x 3 chunks of 100 tokens in all.
  const auto stats = compute_stats(a, o.model);
  EXPECT_DOUBLE_EQ(stats.comm_bytes_total, 4 * 3 * 100 * token_bytes(o.model).kv);
  // Rank r computes its rows against chunks 0..r only: the mask empties the later steps.
  EXPECT_EQ(a.tasks.size(), 4u + 3u + 2u + 1u);
  for (const auto& t : a.tasks) EXPECT_LE(t.keys.begin, t.queries[0].begin);
}

// The broadcasts as the point-to-point transfers they stand for.
std::vector<Transfer> point_to_point(const Assignment& a) {
  std::vector<Transfer> out;
  for (const auto& t : a.transfers) {
    for (int r = 0; r < a.batch.ranks; ++r) {
      if (t.broadcast() ? r != t.src : r == t.dst) out.push_back({t.kind, t.doc, t.tokens, t.src, r, t.heads});
    }
  }
  return out;
}

TEST(StaticCp, OneBroadcastPerChunkCountsAsEveryPointToPointTransfer) {
  const auto o = tiny_options();
  const Batch batch = pack_batch({Document{0, 150, MaskSpec::causal()}, Document{1, 170, MaskSpec::causal()},
                                  Document{2, 80, MaskSpec::sliding_window(30)}},
                                 4, 100);
  for (const char* name : {"ring", "zigzag"}) {
    Assignment a = make_planner(name, o)->plan(batch);
    // One transfer per chunk: at thousands of ranks, one per chunk and rank did not fit in memory.
    ASSERT_EQ(a.transfers.size(), a.batch.segments.size()) << name;
    // An explicit transfer beside them (rank 0 receives keys of document 1 it also gets by broadcast):
    // the remote tokens count each token once.
    a.transfers.push_back(
        {TensorKind::kKV, 1, a.batch.segments_of(1).back().tokens, a.batch.segments_of(1).back().rank, 0});
    Assignment expanded = a;
    expanded.transfers = point_to_point(a);
    ASSERT_TRUE(verify(a, batch).ok()) << name << ": " << verify(a, batch).summary();
    ASSERT_TRUE(verify(expanded, batch).ok()) << name << ": " << verify(expanded, batch).summary();
    const auto broadcast = compute_stats(a, o.model), explicit_stats = compute_stats(expanded, o.model);
    EXPECT_EQ(broadcast.rank_bytes_sent, explicit_stats.rank_bytes_sent) << name;
    EXPECT_EQ(broadcast.rank_bytes_received, explicit_stats.rank_bytes_received) << name;
    EXPECT_EQ(broadcast.rank_remote_tokens, explicit_stats.rank_remote_tokens) << name;
    EXPECT_EQ(broadcast.comm_bytes_total, explicit_stats.comm_bytes_total) << name;
  }
}

// At many ranks the Assignment grows with the chunks, not ranks x chunks (at 4096 ranks that ran out of
// memory): one K/V transfer per chunk, and a chunk per (document, ring slot) it overlaps, so at most
// documents + slots - 1 of them. The plans verify, and every token's K/V still reaches each other rank.
TEST(StaticCp, AtManyRanksOneTransferPerChunk) {
  const auto o = tiny_options();
  constexpr Tokens kPerRank = 128;
  const Tokens lengths[] = {3, 700, 5000, 90, 1200};
  for (int ranks : {256, 1024}) {
    const Tokens total = ranks * kPerRank;
    std::vector<Document> docs;
    for (Tokens placed = 0; placed < total;) {
      const int d = static_cast<int>(docs.size());
      const Tokens length = std::min(lengths[d % 5], total - placed);
      docs.push_back({d, length, d % 2 == 0 ? MaskSpec::causal() : MaskSpec::sliding_window(64)});
      placed += length;
    }
    const Batch batch = pack_batch(docs, ranks, kPerRank);
    for (const std::string name : {"ring", "zigzag"}) {
      const std::size_t slots = name == "ring" ? ranks : 2 * static_cast<std::size_t>(ranks);
      const Assignment a = make_planner(name, o)->plan(batch);
      const auto report = verify(a, batch);
      ASSERT_TRUE(report.ok()) << name << " at " << ranks << " ranks: " << report.summary();
      EXPECT_EQ(a.transfers.size(), a.batch.segments.size()) << name << " at " << ranks;
      EXPECT_LE(a.batch.segments.size(), docs.size() + slots - 1) << name << " at " << ranks;
      const double expected = static_cast<double>(ranks - 1) * static_cast<double>(total) * token_bytes(o.model).kv;
      EXPECT_NEAR(compute_stats(a, o.model).comm_bytes_total, expected, 1e-12 * expected) << name << " at " << ranks;
    }
  }
}

TEST(StaticCp, ZigzagHoldsChunksRAndTwoNMinusOneMinusR) {
  const auto o = tiny_options();
  const Batch batch = one_long_document();
  const Assignment a = make_planner("zigzag", o)->plan(batch);
  ASSERT_TRUE(verify(a, batch).ok()) << verify(a, batch).summary();
  ASSERT_EQ(a.batch.segments.size(), 8u);
  const int owner[] = {0, 1, 2, 3, 3, 2, 1, 0};
  for (int j = 0; j < 8; ++j) {
    EXPECT_EQ(a.batch.segments[j].tokens, (Range{50 * j, 50 * (j + 1)}));
    EXPECT_EQ(a.batch.segments[j].rank, owner[j]);
  }
  // The zigzag balances a causal document: max/mean rank FLOPs within 1.1, where ring's is 1.75.
  EXPECT_LT(compute_stats(a, o.model).imbalance, 1.1);
  EXPECT_GT(compute_stats(make_planner("ring", o)->plan(batch), o.model).imbalance, 1.7);
}

TEST(StaticCp, CompiledPlansVerify) {
  const auto o = tiny_options();
  const HeadLayout heads = head_layout(o.model, 4);
  Batch batch = pack_batch({Document{0, 150, MaskSpec::lambda(8, 40)}, Document{1, 170, MaskSpec::causal()},
                            Document{2, 80, MaskSpec::causal_blockwise(16, 1)}},
                           4, 100);
  for (CpLayout layout : {CpLayout::kRing, CpLayout::kZigzag}) {
    const Assignment a = make_planner(layout == CpLayout::kRing ? "ring" : "zigzag", o)->plan(batch);
    for (Pass pass : {Pass::kForward, Pass::kBackward}) {
      const auto report = verify_plan(compile(a, heads, pass, CommMode::kPingPong), a.batch);
      EXPECT_TRUE(report.ok()) << a.planner << ": " << report.summary();
    }
  }
}

}  // namespace
}  // namespace fulcrum

#include "fulcrum/plan/verify.hpp"

#include "fulcrum/core/random.hpp"
#include "fulcrum/cost/attention_cost.hpp"
#include "fulcrum/plan/plan_test_cases.hpp"
#include "fulcrum/plan/stats.hpp"
#include "fulcrum/workload/limits.hpp"
#include "fulcrum/workload/mask_test_cases.hpp"

#include <gtest/gtest.h>

#include <map>
#include <tuple>
#include <vector>

namespace fulcrum {
namespace {

// Two ranks of 8 tokens: document 0 (10 tokens) spans both ranks, document 1 (6 tokens) is on rank 1.
Batch small_batch(MaskSpec mask = MaskSpec::causal()) {
  std::vector<Document> docs = {{0, 10, mask}, {1, 6, mask}};
  return pack_batch(docs, 2, 8);
}

// Rows [0,4) and [4,10) of document 0 computed on rank 1, document 1 on rank 0: everything moves.
Assignment moved_assignment(const Batch& batch) {
  Assignment a{"test", batch, {}, {}};
  a.tasks = {{0, {Range{0, 4}, Range{}}, {0, 4}, 1},
             {0, {Range{4, 10}, Range{}}, {0, 10}, 0},
             {1, {Range{0, 6}, Range{}}, {0, 6}, 0}};
  a.transfers = minimal_transfers(a.batch, a.tasks);
  return a;
}

TEST(Verify, AcceptsAValidAssignmentWithTraffic) {
  const auto a = moved_assignment(small_batch());
  const auto report = verify(a, small_batch());
  EXPECT_TRUE(report.ok()) << report.summary();
  EXPECT_FALSE(a.transfers.empty());
}

TEST(Verify, RejectsAMissingShard) {
  auto a = moved_assignment(small_batch());
  a.tasks.erase(a.tasks.begin());
  const auto report = verify(a);
  ASSERT_FALSE(report.ok());
  EXPECT_NE(report.summary().find("not conserved"), std::string::npos) << report.summary();
  EXPECT_NE(report.summary().find("visible keys"), std::string::npos) << report.summary();
}

TEST(Verify, RejectsADoubledShard) {
  auto a = moved_assignment(small_batch());
  a.tasks.push_back({0, {Range{2, 3}, Range{}}, {0, 3}, 0});
  a.transfers = minimal_transfers(a.batch, a.tasks);
  const auto report = verify(a);
  ASSERT_FALSE(report.ok());
  EXPECT_NE(report.summary().find("more than once"), std::string::npos) << report.summary();
}

// 17 copies of a full 2^30-token document's task sum to 17 x 2^60 pairs, which wrapped in 64 bits to
// exactly the document's 2^60: the conservation check passed. The sum saturates instead.
TEST(Verify, PairSumsOfOverlappingTasksDoNotWrap) {
  const Tokens n = kMaxDocumentTokens;
  Assignment a{"test", pack_batch({{0, n, MaskSpec::full()}}, 1, n), {}, {}};
  a.tasks.assign(17, CATask{0, {Range{0, n}, Range{}}, {0, n}, 0});
  const auto report = verify(a);
  ASSERT_FALSE(report.ok());
  EXPECT_NE(report.summary().find("tasks compute 9223372036854775807 pairs, the mask has 1152921504606846976"),
            std::string::npos)
      << report.summary();
}

TEST(Verify, RejectsKeySplitsThatLeaveAGap) {
  // Rows [4, 10) read keys [0, 3) and [4, 10): key 3 is never computed.
  auto a = moved_assignment(small_batch());
  a.tasks[1].keys = {0, 3};
  a.tasks.push_back({0, {Range{4, 10}, Range{}}, {4, 10}, 0});
  a.transfers = minimal_transfers(a.batch, a.tasks);
  EXPECT_FALSE(verify(a).ok());
}

TEST(Verify, RejectsMissingInputsAndOutputs) {
  const auto base = moved_assignment(small_batch());
  for (auto kind : {TensorKind::kQ, TensorKind::kKV, TensorKind::kOut}) {
    auto a = base;
    std::erase_if(a.transfers, [&](const Transfer& t) { return t.kind == kind; });
    const auto report = verify(a);
    EXPECT_FALSE(report.ok()) << "dropping " << to_string(kind) << " transfers went unnoticed";
  }
  auto a = base;
  a.transfers.front().src = 1 - a.transfers.front().src;  // sent by a rank that does not hold it
  EXPECT_FALSE(verify(a).ok());
}

// Every rank computes its own rows of document 0 against every key, K/V broadcast (kEveryRank) by its
// owner, as a ring moves it; three ranks of 4 tokens, document 0 on all three.
Assignment broadcast_assignment() {
  const Batch batch = pack_batch({{0, 12, MaskSpec::causal()}}, 3, 4);
  Assignment a{"test", batch, {}, {}};
  for (const auto& s : batch.segments) {
    a.tasks.push_back({0, {s.tokens, Range{}}, {0, s.tokens.end}, s.rank});
    a.transfers.push_back({TensorKind::kKV, 0, s.tokens, s.rank, kEveryRank});
  }
  return a;
}

TEST(Verify, ABroadcastReachesEveryRankButItsSender) {
  const auto a = broadcast_assignment();
  EXPECT_TRUE(verify(a).ok()) << verify(a).summary();
  auto missing = a;
  missing.transfers.erase(missing.transfers.begin());  // rows [4, 12) see keys [0, 4): nobody sends them
  const auto report = verify(missing);
  ASSERT_FALSE(report.ok());
  EXPECT_NE(report.summary().find("never reach server 1"), std::string::npos) << report.summary();
  auto stranger = a;
  stranger.transfers[0].src = 2;  // rank 2 does not own keys [0, 4)
  EXPECT_NE(verify(stranger).summary().find("does not own it"), std::string::npos) << verify(stranger).summary();
  auto output = a;
  output.transfers.push_back({TensorKind::kOut, 0, {0, 4}, 0, kEveryRank});
  EXPECT_NE(verify(output).summary().find("to every rank"), std::string::npos) << verify(output).summary();
}

TEST(Verify, RejectsBrokenPlacementAndOutOfRangeTasks) {
  auto a = moved_assignment(small_batch());
  a.batch.segments.pop_back();
  EXPECT_FALSE(verify(a).ok());
  a = moved_assignment(small_batch());
  a.tasks[0].server = 5;
  EXPECT_FALSE(verify(a).ok());
  a = moved_assignment(small_batch());
  a.tasks[2].queries[0] = {0, 7};
  EXPECT_FALSE(verify(a).ok());
  EXPECT_FALSE(verify(moved_assignment(small_batch()), pack_batch({{0, 10, {}}}, 2, 8)).ok());
}

// Brute force over every (q, k) pair of each document, independent of the verifier's range logic:
// `exact`: every pair the mask allows (MaskSpec::allows, exact for every kind) is computed exactly once;
// `causal_hull`: every pair with k <= q is computed exactly once, the stricter rule plan::verify applies
// to index-list masks (it tiles their causal hull, mask.hpp); `full_square`: every pair is computed
// exactly once, the rule for striped masks (their hull is the full square).
struct Coverage {
  bool exact = true;
  bool causal_hull = true;
  bool full_square = true;
};

Coverage brute_force(const Assignment& a) {
  Coverage c;
  for (std::size_t d = 0; d < a.batch.documents.size(); ++d) {
    const auto& doc = a.batch.documents[d];
    const auto n = static_cast<std::size_t>(doc.length);
    std::vector<int> count(n * n, 0);  // [q][k]: how many tasks compute the pair
    for (const auto& t : a.tasks) {
      if (t.doc != static_cast<int>(d)) continue;
      for (const auto& q : t.query_ranges()) {
        for (Tokens row = q.begin; row < q.end; ++row) {
          for (Tokens key = t.keys.begin; key < t.keys.end; ++key) ++count[static_cast<std::size_t>(row) * n + key];
        }
      }
    }
    for (Tokens q = 0; q < doc.length; ++q) {
      for (Tokens k = 0; k < doc.length; ++k) {
        const int times = count[static_cast<std::size_t>(q) * n + k];
        // A task's rectangle may hold pairs the mask forbids (the kernel skips them): only allowed pairs
        // must be computed exactly once.
        if (doc.mask.allows(q, k, doc.length) && times != 1) c.exact = false;
        if (k <= q && times != 1) c.causal_hull = false;
        if (times != 1) c.full_square = false;
      }
    }
  }
  return c;
}

TEST(Verify, CoverageAgreesWithBruteForceOnRandomTilings) {
  Rng rng(99);
  const std::vector<MaskSpec> masks = testing::with_every_kind(
      {MaskSpec::causal(), MaskSpec::full(), MaskSpec::sliding_window(5), MaskSpec::lambda(2, 4),
       MaskSpec::causal_blockwise(3, 1), MaskSpec::causal_blockwise(2, 0), MaskSpec::shared_question(3, 25),
       MaskSpec::vertical_slash({0, 7}, {0, 2}), MaskSpec::block_sparse(4, {{0, 0}, {1, 0}, {2, 1}, {2, 2}, {4, 4}}),
       MaskSpec::vertical_slash_blocks(3, {5}, {0, 2}), MaskSpec::striped(MaskSpec::causal(), 2, 2)});
  const auto mask_count = static_cast<int>(std::size(masks));
  int invalid_seen = 0;
  for (int trial = 0; trial < 100 * mask_count; ++trial) {
    const auto mask = masks[trial % mask_count];
    const Tokens multiple = mask.length_multiple();  // 24 is a multiple of every one here
    const Tokens len = (rng.uniform_int(1, 24) + multiple - 1) / multiple * multiple;
    const auto batch = pack_batch({{0, len, mask}}, 2, 12);
    Assignment a{"random", batch, {}, {}};
    // Random row blocks, each split into random key blocks; then maybe perturb one range by one token.
    for (Tokens r = 0; r < len;) {
      const Tokens r_end = std::min(len, r + rng.uniform_int(1, 6));
      for (Tokens k = 0; k < len;) {
        const Tokens k_end = std::min(len, k + rng.uniform_int(1, 8));
        a.tasks.push_back({0, {Range{r, r_end}, Range{}}, {k, k_end}, static_cast<int>(rng.uniform_int(0, 1))});
        k = k_end;
      }
      r = r_end;
    }
    if (rng.uniform() < 0.5) {
      auto& t = a.tasks[static_cast<std::size_t>(rng.uniform_int(0, static_cast<std::int64_t>(a.tasks.size()) - 1))];
      Range& victim = rng.uniform() < 0.5 ? t.keys : t.queries[0];
      if (rng.uniform() < 0.5 && victim.end < len)
        ++victim.end;
      else if (victim.size() > 1)
        --victim.end;
    }
    a.transfers = minimal_transfers(a.batch, a.tasks);
    const Coverage truth = brute_force(a);
    // Band masks: accepted iff exact. Index-list masks: plan::verify demands the causal hull tiled
    // exactly once (striped: the full square), which implies exact coverage, so it may reject an exact
    // tiling but must never accept one that misses or repeats an allowed pair.
    const bool hull = mask.kind == MaskKind::kStriped ? truth.full_square : truth.causal_hull;
    const bool expected = truth.exact && (!mask.plans_over_hull() || hull);
    invalid_seen += truth.exact ? 0 : 1;
    const auto report = verify(a);
    EXPECT_EQ(report.ok(), expected) << "trial " << trial << " mask " << mask.to_string() << " exact " << truth.exact
                                     << " hull " << truth.causal_hull << "\n"
                                     << report.summary();
  }
  EXPECT_GT(invalid_seen, 10 * mask_count);  // the perturbations really produce broken tilings
}

TEST(Stats, CountsTrafficAndBalance) {
  const auto a = moved_assignment(small_batch());
  const auto model = model_shape_preset("tiny");
  const auto s = compute_stats(a, model);
  double total = 0;
  for (const auto& t : a.transfers) total += transfer_bytes(t, model);
  EXPECT_DOUBLE_EQ(s.comm_bytes_total, total);
  EXPECT_EQ(s.tasks, 3u);
  EXPECT_DOUBLE_EQ(s.memory_imbalance, 1.0);  // both ranks own 8 tokens
  EXPECT_GT(s.imbalance, 1.0);
  // Two ranks: every byte one sends the other receives, so sent + received is the same on both.
  EXPECT_DOUBLE_EQ(s.traffic_imbalance, 1.0);
}

TEST(Stats, TrafficImbalanceIsTheBusiestRanksSentPlusReceivedOverTheMean) {
  // Three ranks; rank 0 sends K/V to ranks 1 and 2: sent + received is 2b, b, b (mean 4b/3), so 1.5.
  Batch batch = pack_batch({{0, 12, MaskSpec::causal()}}, 3, 4);
  Assignment a{"test", batch, {}, {}};
  a.transfers = {{TensorKind::kKV, 0, {0, 4}, 0, 1}, {TensorKind::kKV, 0, {0, 4}, 0, 2}};
  EXPECT_DOUBLE_EQ(compute_stats(a, model_shape_preset("tiny")).traffic_imbalance, 1.5);
  a.transfers.clear();
  EXPECT_DOUBLE_EQ(compute_stats(a, model_shape_preset("tiny")).traffic_imbalance, 1.0);  // nothing moves
}

// Heads: document 0 of small_batch with 4 q heads, causal on heads 0-1 and a sliding window on 2-3,
// split as heads [0, 2) on rank 0 and [2, 4) on rank 1 for every row.
Assignment head_split_assignment() {
  Batch batch = small_batch();
  batch.documents[0].head_masks = {MaskSpec::causal(), MaskSpec::causal(), MaskSpec::sliding_window(3),
                                   MaskSpec::sliding_window(3)};
  Assignment a{"test", batch, {}, {}, 4};
  a.tasks = {{0, {Range{0, 10}, Range{}}, {0, 10}, 0, -1, {0, 2}},
             {0, {Range{0, 10}, Range{}}, {0, 10}, 1, -1, {2, 4}},
             {1, {Range{0, 6}, Range{}}, {0, 6}, 0}};
  a.transfers = minimal_transfers(a.batch, a.tasks);
  return a;
}

TEST(VerifyHeads, AcceptsTasksSplitOverHeadsWithPerHeadMasks) {
  const auto a = head_split_assignment();
  const auto report = verify(a, a.batch);
  EXPECT_TRUE(report.ok()) << report.summary();
}

TEST(VerifyHeads, RejectsAPlanMissingOneHeadOfOneRow) {
  auto a = head_split_assignment();
  // Heads [2, 4) now stop at row 9, and row 9 gets only head 2: head 3 of row 9 is never computed.
  a.tasks[1].queries[0] = {0, 9};
  a.tasks.push_back({0, {Range{9, 10}, Range{}}, {0, 10}, 1, -1, {2, 3}});
  a.transfers = minimal_transfers(a.batch, a.tasks);
  const auto report = verify(a);
  ASSERT_FALSE(report.ok());
  EXPECT_NE(report.summary().find("document 0 heads [3, 4) row 9: tasks cover 0 of its 3 visible keys"),
            std::string::npos)
      << report.summary();
}

TEST(VerifyHeads, RejectsOverlappingHeadRangesAndHeadsOutsideTheModel) {
  auto a = head_split_assignment();
  a.tasks[1].heads = {1, 4};  // head 1 computed twice
  auto report = verify(a);
  ASSERT_FALSE(report.ok());
  EXPECT_NE(report.summary().find("heads [1, 2)"), std::string::npos) << report.summary();
  a = head_split_assignment();
  a.tasks[1].heads = {2, 5};
  report = verify(a);
  ASSERT_FALSE(report.ok());
  EXPECT_NE(report.summary().find("task 1: heads [2, 5)"), std::string::npos) << report.summary();
  a = head_split_assignment();
  a.q_heads = 0;
  a.batch.documents[0].head_masks.clear();
  report = verify(a);
  ASSERT_FALSE(report.ok());
  EXPECT_NE(report.summary().find("Assignment::q_heads = 0"), std::string::npos) << report.summary();
}

TEST(VerifyHeads, WrongPerHeadMaskCountIsRejected) {
  auto a = head_split_assignment();
  a.batch.documents[0].head_masks.pop_back();
  const auto report = verify(a);
  ASSERT_FALSE(report.ok());
  EXPECT_NE(report.summary().find("head_masks has 3 masks"), std::string::npos) << report.summary();
}

TEST(VerifyHeads, RandomHeadSplitAssignmentsAreValidAndBreakingOneIsCaught) {
  int broken = 0;
  for (std::uint64_t seed = 0; seed < 40; ++seed) {
    auto a = testing::random_head_assignment(seed, 4);
    auto report = verify(a);
    ASSERT_TRUE(report.ok()) << "seed " << seed << ": " << report.summary();
    // Drop the last head of one task that covers several and sees some pair under that head's mask.
    for (auto& t : a.tasks) {
      if (t.heads.all() || t.heads.end - t.heads.begin <= 1) continue;  // all(): no head index to drop
      const MaskSpec& last = a.batch.documents[t.doc].mask_of(t.heads.end - 1);
      if (attention_pairs(last, t.query_ranges(), t.keys, a.batch.documents[t.doc].length) > 0) {
        --t.heads.end;
        EXPECT_FALSE(verify(a).ok()) << "seed " << seed;
        ++broken;
        break;
      }
    }
  }
  EXPECT_GE(broken, 20) << "too few seeds had a head to drop";
}

// minimal_transfers with heads: Q and O+LSE for each task's q heads, K/V for whole kv groups (named by
// their q heads) fetched once per (server, document, group); transfer_bytes counts those heads only; a
// transfer that leaves out a head a task reads is caught.
TEST(VerifyHeads, MinimalTransfersMoveOnlyTheTasksHeads) {
  const ModelShape model{"gqa", 1, 128, 8, 2, 16, 256, 4};
  for (int split : {4, 3}) {
    Assignment a = testing::gqa_head_split_assignment(3, split);
    ASSERT_TRUE(verify(a).ok()) << verify(a).summary();
    bool sliced = false;
    for (const auto& t : a.transfers) {
      ASSERT_FALSE(t.heads.all() && t.kind != TensorKind::kKV) << "every task has a head range";
      if (t.kind == TensorKind::kKV && !t.heads.all()) {
        EXPECT_EQ(t.heads.begin % 4, 0);
        EXPECT_EQ(t.heads.end % 4, 0) << "K/V transfers name whole kv groups";
      }
      Transfer whole = t;
      whole.heads = {};
      const double share = transfer_bytes(t, model) / transfer_bytes(whole, model);
      const double q_share = t.heads.count(8) / 8.0;
      EXPECT_DOUBLE_EQ(share, t.kind == TensorKind::kKV ? kv_heads_read(t.heads, 8, 2).count(2) / 2.0 : q_share);
      sliced = sliced || share < 1;
    }
    EXPECT_TRUE(sliced);
    // Given the group size, no (key, kv head) reaches a server twice, even where two of its tasks split
    // kv head 0's group over the same keys (split 3 on 3 ranks).
    std::map<std::tuple<int, int, Tokens, int>, int> fetched;  // (server, doc, key, kv head)
    for (const auto& t : a.transfers) {
      if (t.kind != TensorKind::kKV) continue;
      const HeadRange kv = kv_heads_read(t.heads, 8, 2);
      for (Tokens k = t.tokens.begin; k < t.tokens.end; ++k) {
        for (int h = kv.first(); h < kv.last(2); ++h) {
          const int times = ++fetched[std::tuple{t.dst, t.doc, k, h}];
          EXPECT_EQ(times, 1) << "server " << t.dst << " document " << t.doc << " key " << k << " kv head " << h;
        }
      }
    }
    for (auto& t : a.transfers) {
      if (t.kind == TensorKind::kQ && t.heads.count(8) > 1) {
        t.heads.end = t.heads.last(8) - 1;
        t.heads.begin = t.heads.first();
        break;
      }
    }
    const auto report = verify(a);
    ASSERT_FALSE(report.ok()) << "split " << split;
    EXPECT_NE(report.summary().find("never reach server"), std::string::npos) << report.summary();
  }
}

}  // namespace
}  // namespace fulcrum

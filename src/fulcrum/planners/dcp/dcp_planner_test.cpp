#include "fulcrum/planners/dcp/dcp_planner.hpp"

#include "fulcrum/core/error.hpp"
#include "fulcrum/plan/compile.hpp"
#include "fulcrum/plan/program_verify.hpp"
#include "fulcrum/plan/serialize.hpp"
#include "fulcrum/plan/stats.hpp"
#include "fulcrum/plan/verify.hpp"
#include "fulcrum/workload/length_source.hpp"
#include "fulcrum/workload/limits.hpp"
#include "fulcrum/workload/mask_test_cases.hpp"

#include <gtest/gtest.h>

#include <functional>
#include <set>
#include <string>
#include <vector>

namespace fulcrum {
namespace {

constexpr Tokens kBlock = 32;

PlannerOptions small_options() {
  PlannerOptions o;
  o.model = model_shape_preset("tiny");
  o.set("dcp-block", kBlock);
  return o;
}

Batch small_batch(int ranks, const MaskSpec& mask, std::uint64_t seed) {
  auto source = make_length_source("uniform:16:700", seed, 256);
  BatchStream stream([&] { return source->next(); }, ranks, 256, mask);
  return stream.next();
}

const std::vector<MaskSpec> kMasks =
    testing::with_every_kind({MaskSpec::causal(), MaskSpec::full(), MaskSpec::sliding_window(80),
                              MaskSpec::lambda(16, 96), MaskSpec::causal_blockwise(64, 2),
                              MaskSpec::shared_question(4, 20), MaskSpec::vertical_slash({0, 1, 200}, {0, 1, 64}),
                              MaskSpec::block_sparse(32, {{0, 0}, {1, 0}, {1, 1}, {4, 2}, {9, 9}, {12, 0}})});

TEST(DcpPlanner, CompiledPlansVerifyForEveryMaskAndDivisionCount) {
  const HeadLayout heads = head_layout(model_shape_preset("tiny"), 4);
  for (const auto& mask : kMasks) {
    for (int divisions : {1, 2, 4}) {
      auto o = small_options();
      o.set("dcp-divisions", divisions);
      const Batch batch = small_batch(4, mask, 7);
      const Assignment a = make_planner("dcp", o)->plan(batch);
      ASSERT_TRUE(verify(a, batch).ok()) << mask.to_string() << ": " << verify(a, batch).summary();
      for (Pass pass : {Pass::kForward, Pass::kBackward}) {
        for (CommMode schedule : {CommMode::kPingPong, CommMode::kSingleStream}) {
          const auto report = verify_plan(compile(a, heads, pass, schedule), a.batch);
          ASSERT_TRUE(report.ok()) << mask.to_string() << " T=" << divisions << ": " << report.summary();
        }
      }
    }
  }
}

// Q, K/V and O of a token live on one rank (the batch's segments say where a token lives, for all of
// its tensors), each data block whole on one rank, and every task is one q-block's rows.
TEST(DcpPlanner, DataBlocksStayWholeAndTasksAreTiles) {
  const auto o = small_options();
  const Batch batch = small_batch(4, MaskSpec::causal(), 3);
  const Assignment a = make_planner("dcp", o)->plan(batch);
  for (const auto& s : a.batch.segments) {
    EXPECT_EQ(s.tokens.begin % kBlock, 0);
    EXPECT_TRUE(s.tokens.end % kBlock == 0 || s.tokens.end == a.batch.documents[s.doc].length);
  }
  for (const auto& t : a.tasks) {
    EXPECT_EQ(t.queries[0].begin % kBlock, 0);
    EXPECT_LE(t.queries[0].size(), kBlock);
    EXPECT_TRUE(t.queries[1].empty());
    EXPECT_GE(t.division, 0);
    EXPECT_LT(t.division, o.get(find_planner_option("dcp-divisions")));
  }
}

// A full-size batch: 131,072 tokens on 32 devices (4 machines x 8), block 1024. The partition keeps
// compute within the two levels' slack and moves far less than sending every K/V everywhere.
TEST(DcpPlanner, BalancesAFullSizeBatchAcrossMachines) {
  PlannerOptions o;
  o.model = model_shape_preset("llama3-8b");
  auto source = make_length_source("pretrain", 1, 4096);
  BatchStream stream([&] { return source->next(); }, 32, 4096);
  const Batch batch = stream.next();
  const Assignment a = make_planner("dcp", o)->plan(batch);
  ASSERT_TRUE(verify(a, batch).ok()) << verify(a, batch).summary();
  const auto dcp = compute_stats(a, o.model);
  const auto ring = compute_stats(make_planner("ring", o)->plan(batch), o.model);
  EXPECT_LE(dcp.imbalance, (1 + o.get(find_planner_option("dcp-epsilon-machines"))) *
                                   (1 + o.get(find_planner_option("dcp-epsilon-devices"))) +
                               0.05);
  EXPECT_LT(dcp.comm_bytes_total, ring.comm_bytes_total / 2);
}

// 8 q heads in 4 GQA groups: 1, 2 and 4 head blocks hold whole groups (the tiny preset has 2 groups).
ModelShape four_groups() { return {"four-groups", 2, 512, 8, 4, 64, 688, 2}; }

std::string bad_input(const std::function<void()>& body) {
  try {
    body();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kBadInput) << e.what();
    return e.what();
  }
  return "no error";
}

TEST(DcpPlanner, HeadBlocksAreCheckedAgainstTheModelsGqaGroups) {
  auto o = small_options();  // tiny: 4 q heads, 2 kv heads
  EXPECT_NE(bad_input([&] { o.set("dcp-head-blocks", 0); }).find("dcp-head-blocks = 0: must be a whole number in [1, "),
            std::string::npos);
  EXPECT_NE(bad_input([&] { o.set("dcp-head-blocks", 1.5); }).find("dcp-head-blocks = 1.5"), std::string::npos);
  o.set("dcp-head-blocks", 4);
  EXPECT_NE(bad_input([&] { make_planner("dcp", o); })
                .find("dcp-head-blocks = 4: must divide the model's kv_heads = 2 (head blocks hold whole GQA groups of "
                      "2 q heads): one of 1, 2"),
            std::string::npos);
  o.set("dcp-head-blocks", 2);
  EXPECT_NO_THROW(make_planner("dcp", o));
  o.model = four_groups();
  for (int h : {1, 2, 4}) EXPECT_NO_THROW(make_planner("dcp", o.set("dcp-head-blocks", h))) << h;
  for (int h : {3, 8}) {
    EXPECT_NE(bad_input([&] { make_planner("dcp", o.set("dcp-head-blocks", h)); }).find("one of 1, 2, 4"),
              std::string::npos)
        << h;
  }
}

// The default is one head block, and one head block is the planner as it was before head blocks: the
// same tasks (over all heads, no Assignment::q_heads) and byte-identical compiled plans. (Before this
// option existed the same comparison against the previous planner's saved plans gave identical bytes.)
TEST(DcpPlanner, OneHeadBlockPlansExactlyAsWithoutTheOption) {
  const HeadLayout heads = head_layout(model_shape_preset("tiny"), 4);
  for (const auto& mask : kMasks) {
    for (int ranks : {2, 4}) {
      const Batch batch = small_batch(ranks, mask, 11);
      auto o = small_options();
      const Assignment unset = make_planner("dcp", o)->plan(batch);
      const Assignment one = make_planner("dcp", o.set("dcp-head-blocks", 1))->plan(batch);
      EXPECT_EQ(one.q_heads, 0);
      ASSERT_EQ(one.tasks.size(), unset.tasks.size()) << mask.to_string();
      for (std::size_t i = 0; i < one.tasks.size(); ++i) {
        const CATask &x = one.tasks[i], &y = unset.tasks[i];
        EXPECT_TRUE(x.heads.all() && x.heads == y.heads) << mask.to_string() << " task " << i;
        EXPECT_TRUE(x.doc == y.doc && x.queries == y.queries && x.keys == y.keys && x.server == y.server &&
                    x.division == y.division)
            << mask.to_string() << " task " << i;
      }
      for (Pass pass : {Pass::kForward, Pass::kBackward}) {
        EXPECT_EQ(to_binary(compile(one, heads, pass, CommMode::kPingPong)),
                  to_binary(compile(unset, heads, pass, CommMode::kPingPong)))
            << mask.to_string();
      }
    }
  }
}

// Head blocks on random batches: every mask kind, 2 and 4 head blocks, one and two partition levels.
// The plan passes the contract and exact coverage per head (plan_verified), its tasks carry their head
// block's range, and both passes compile, in both schedules, to Plans verify_plan accepts.
TEST(DcpPlanner, HeadBlockPlansVerifyAndCompileForEveryMask) {
  const ModelShape model = four_groups();
  const HeadLayout layout = head_layout(model, 4);
  for (const auto& mask : kMasks) {
    for (int h : {2, 4}) {
      for (std::uint64_t seed = 1; seed <= 3; ++seed) {
        const int ranks = seed == 3 ? 8 : 2 * static_cast<int>(seed);  // 8: 2 machines of 4 devices
        auto o = small_options();
        o.model = model;
        o.devices_per_machine = 4;
        o.seed = seed;
        o.set("dcp-head-blocks", h);
        const Batch batch = small_batch(ranks, mask, seed);
        const auto planner = make_planner("dcp", o);
        const Assignment a = plan_verified(*planner, batch);
        const std::string where = fmt::format("{} H={} seed {}", mask.to_string(), h, seed);
        ASSERT_EQ(a.q_heads, model.q_heads) << where;
        for (const auto& t : a.tasks) {
          ASSERT_FALSE(t.heads.all()) << where;
          EXPECT_EQ(t.heads.count(model.q_heads), model.q_heads / h) << where;
          EXPECT_EQ(t.heads.begin % (model.q_heads / h), 0) << where;
        }
        for (Pass pass : {Pass::kForward, Pass::kBackward}) {
          for (CommMode schedule : {CommMode::kPingPong, CommMode::kSingleStream}) {
            const auto report = verify_plan(compile(a, layout, pass, schedule), a.batch);
            ASSERT_TRUE(report.ok()) << where << ": " << report.summary();
          }
        }
      }
    }
  }
}

// What head blocks are for: one tile is one computation block, which no partition can spread, so a
// document of one tile on two devices leaves one idle. In four head blocks (each 1/4 of the work) the
// partitioner must spread it: its balance bound is max((1 + ε) · mean, mean + heaviest block), 3/4 of
// the work here.
TEST(DcpPlanner, HeadBlocksSpreadOneTilesWorkOverDevices) {
  const Batch batch = pack_batch({Document{0, 256, MaskSpec::causal()}}, 2, 128);
  auto o = small_options();
  o.model = four_groups();
  o.set("dcp-block", 256);
  const auto whole = compute_stats(make_planner("dcp", o)->plan(batch), o.model);
  EXPECT_DOUBLE_EQ(whole.imbalance, 2.0);
  const auto planner = make_planner("dcp", o.set("dcp-head-blocks", 4));
  const Assignment a = plan_verified(*planner, batch);
  EXPECT_LE(compute_stats(a, o.model).imbalance, 1.5 + 1e-9);
  std::set<int> servers;
  for (const auto& t : a.tasks) servers.insert(t.server);
  EXPECT_EQ(servers.size(), 2u) << "one document's heads on both devices";
}

// Beyond its size DCP refuses before any work (it ran for minutes and out of memory), naming dcp-block,
// the bounds and a block size that fits; at the bounds it accepts.
TEST(DcpPlanner, RefusesABatchBeyondItsSizeNamingTheBlockThatFits) {
  auto o = small_options();
  o.set("dcp-block", 1);
  const auto planner = make_planner("dcp", o);
  auto one_document = [](Tokens length, const MaskSpec& mask) {
    return pack_batch({Document{0, length, mask}}, 2, length);
  };
  const Tokens longest = kDcpMaxDocumentBlocks;  // tokens, at one token per block
  EXPECT_NO_THROW(planner->check_batch(one_document(longest, MaskSpec::causal())));
  try {
    planner->check_batch(one_document(longest + 1, MaskSpec::causal()));
    ADD_FAILURE() << "a document of more blocks than DCP plans was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kBadInput);
    const std::string what = e.what();
    EXPECT_NE(what.find("dcp-block = 1:"), std::string::npos) << what;
    EXPECT_NE(what.find(fmt::format("a document of {} blocks", longest + 1)), std::string::npos) << what;
    EXPECT_NE(what.find(fmt::format("at most {} computation blocks and {} blocks per document", kDcpMaxComputeBlocks,
                                    kDcpMaxDocumentBlocks)),
              std::string::npos)
        << what;
    EXPECT_NE(what.find("use dcp-block >= 2"), std::string::npos) << what;
  }
  // The largest document at one token per block: refused from its length alone, with the block that fits
  // (2^30 / 256 tokens: 256 blocks, 32,896 causal tiles).
  try {
    planner->check_batch(one_document(kMaxDocumentTokens, MaskSpec::causal()));
    ADD_FAILURE() << "the largest document at one token per block was accepted";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(fmt::format("a document of {} blocks", kMaxDocumentTokens)), std::string::npos) << what;
    EXPECT_NE(what.find(fmt::format("use dcp-block >= {}", kMaxDocumentTokens / kDcpMaxDocumentBlocks)),
              std::string::npos)
        << what;
  }
  // Many short documents under the full mask: 16 x 16 tiles each, over the computation blocks' bound.
  const int documents = static_cast<int>(kDcpMaxComputeBlocks / 256) + 1;
  std::vector<Document> docs;
  for (int d = 0; d < documents; ++d) docs.push_back({d, 16, MaskSpec::full()});
  const Batch many = pack_batch(docs, 2, 16 * documents);
  try {
    planner->check_batch(many);
    ADD_FAILURE() << "more computation blocks than DCP plans were accepted";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(fmt::format("more than {} computation blocks", kDcpMaxComputeBlocks)), std::string::npos)
        << what;
    EXPECT_NE(what.find("use dcp-block >= 2"), std::string::npos) << what;  // 8 x 8 tiles of 2 tokens each
  }
  EXPECT_THROW(planner->plan(many), Error);  // plan checks first
  docs.pop_back();
  EXPECT_NO_THROW(planner->check_batch(pack_batch(docs, 2, 16 * documents)));
}

}  // namespace
}  // namespace fulcrum

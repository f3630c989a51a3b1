#include "fulcrum/plan/compile.hpp"

#include "fulcrum/core/error.hpp"
#include "fulcrum/plan/plan_test_cases.hpp"
#include "fulcrum/plan/program_verify.hpp"
#include "fulcrum/plan/verify.hpp"
#include "fulcrum/workload/mask_test_cases.hpp"

#include <gtest/gtest.h>

#include <vector>

namespace fulcrum {
namespace {

const std::vector<MaskSpec> kMasks =
    testing::with_every_kind({MaskSpec::causal(), MaskSpec::full(), MaskSpec::sliding_window(40),
                              MaskSpec::lambda(4, 24), MaskSpec::causal_blockwise(16, 1),
                              MaskSpec::shared_question(3, 20), MaskSpec::vertical_slash({0, 3, 50}, {0, 1, 17}),
                              MaskSpec::block_sparse(16, {{0, 0}, {1, 0}, {1, 1}, {3, 2}, {5, 5}, {9, 0}})});
const HeadLayout kHeads{4, 2, 16, 4};

// `a` verifies, and its plans for both passes in both schedules pass verify_plan.
void expect_plans_verify(const Assignment& a, std::uint64_t seed) {
  ASSERT_TRUE(verify(a).ok()) << "seed " << seed << ": " << verify(a).summary();
  for (Pass pass : {Pass::kForward, Pass::kBackward}) {
    for (CommMode schedule : {CommMode::kPingPong, CommMode::kSingleStream}) {
      const Plan plan = compile(a, kHeads, pass, schedule);
      const auto report = verify_plan(plan, a.batch);
      ASSERT_TRUE(report.ok()) << "seed " << seed << " " << to_string(pass) << " " << to_string(schedule) << ": "
                               << report.summary();
    }
  }
}

TEST(Compile, EveryPlanOfRandomAssignmentsVerifies) {
  for (std::uint64_t seed = 0; seed < 300; ++seed) {
    expect_plans_verify(testing::random_assignment(seed, kMasks[seed % std::size(kMasks)]), seed);
  }
}

// Head-split tasks with per-head masks: every plan verifies (per-head coverage of the items, and every
// head part of a row delivered exactly once to its owner), in both passes and schedules.
TEST(CompileHeads, EveryPlanOfHeadSplitAssignmentsVerifies) {
  for (std::uint64_t seed = 0; seed < 150; ++seed) {
    expect_plans_verify(seed < 3 ? testing::head_split_assignment(static_cast<int>(seed) + 2)
                                 : testing::random_head_assignment(seed, kHeads.q_heads),
                        seed);
  }
}

// A plan that drops one head part of a row is caught by verify_plan (its items no longer cover that
// head), and head ranges or mask lists that do not fit the model are rejected by compile.
TEST(CompileHeads, VerifyPlanCatchesAMissingHeadAndCompileChecksTheModel) {
  const Assignment a = testing::head_split_assignment(2);
  Plan plan = compile(a, kHeads, Pass::kForward, CommMode::kSingleStream);
  bool dropped = false;
  for (auto& program : plan.programs) {
    for (auto& in : program.instructions) {
      auto* att = std::get_if<Attention>(&in.op);
      if (dropped || !att) continue;
      for (auto& item : att->items) {
        if (!item.heads.all() && item.heads.end - item.heads.begin == 2) {
          item.heads.end -= 1;
          dropped = true;
          break;
        }
      }
    }
  }
  ASSERT_TRUE(dropped);
  const auto report = verify_plan(plan, a.batch);
  ASSERT_FALSE(report.ok());
  EXPECT_NE(report.summary().find("coverage: document"), std::string::npos) << report.summary();

  Assignment bad = a;
  bad.tasks[0].heads = {0, 5};
  try {
    compile(bad, kHeads, Pass::kForward, CommMode::kSingleStream);
    FAIL() << "heads past q_heads compiled";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tasks[0].heads = [0, 5)"), std::string::npos) << e.what();
  }
  bad = a;
  bad.batch.documents[1].head_masks.pop_back();
  try {
    compile(bad, kHeads, Pass::kForward, CommMode::kSingleStream);
    FAIL() << "3 head masks for 4 heads compiled";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("documents[1].head_masks has 3 masks"), std::string::npos) << e.what();
  }
}

// A planner's divisions (DCP) are the nano-batches: any number of them, any task in any division.
TEST(Compile, PlansWithPlannerDivisionsVerify) {
  for (std::uint64_t seed = 0; seed < 120; ++seed) {
    Assignment a = testing::random_assignment(seed, kMasks[seed % std::size(kMasks)]);
    Rng rng(seed);
    const int divisions = static_cast<int>(rng.uniform_int(1, 5));
    for (auto& t : a.tasks) t.division = static_cast<int>(rng.uniform_int(0, divisions - 1));
    for (Pass pass : {Pass::kForward, Pass::kBackward}) {
      const Plan plan = compile(a, kHeads, pass, CommMode::kPingPong);
      const auto report = verify_plan(plan, a.batch);
      ASSERT_TRUE(report.ok()) << "seed " << seed << " " << to_string(pass) << ": " << report.summary();
      for (const auto& program : plan.programs) {
        for (const auto& in : program.instructions) EXPECT_LT(in.stream, divisions);
      }
    }
  }
  Assignment mixed = testing::random_assignment(3, MaskSpec::causal());
  mixed.tasks.front().division = 0;
  ASSERT_GT(mixed.tasks.size(), 1u);
  EXPECT_THROW(compile(mixed, kHeads, Pass::kForward, CommMode::kPingPong), Error);
}

// A document split over two ranks whose rows are all computed on rank 1: rank 0 sends its Q and K/V,
// rank 1 returns O and LSE; nothing else moves.
TEST(Compile, MovesExactlyWhatTheTaskNeeds) {
  Assignment a;
  a.batch = pack_batch({{0, 8, MaskSpec::causal()}}, 2, 4);
  a.tasks = {{0, {Range{0, 8}, Range{}}, {0, 8}, 1}};
  const Plan plan = compile(a, kHeads, Pass::kForward, CommMode::kSingleStream);
  ASSERT_TRUE(verify_plan(plan, a.batch).ok());
  std::vector<std::string> sent;
  for (const auto& p : plan.programs) {
    for (const auto& i : p.instructions) {
      if (const auto* l = std::get_if<CommLaunch>(&i.op)) {
        for (const auto& m : l->sends) {
          sent.push_back(fmt::format("{}->{} {} x{}", p.rank, m.peer, p.buffers[m.slice.buffer].name, m.slice.rows));
        }
      }
    }
  }
  EXPECT_EQ(sent, (std::vector<std::string>{"0->1 q x4", "0->1 k x4", "0->1 v x4", "1->0 ws0.remote.o x4",
                                            "1->0 ws0.remote.lse x4"}));
}

// Keys split over the owner and another server: the owner merges its own part in place with the part
// it receives (forward), and sums dQ (backward).
TEST(Compile, SplitKeysAreMergedAndSummedAtTheOwner) {
  Assignment a;
  a.batch = pack_batch({{0, 8, MaskSpec::causal()}}, 2, 4);
  a.tasks = {{0, {Range{4, 8}, Range{}}, {0, 4}, 0},
             {0, {Range{4, 8}, Range{}}, {4, 8}, 1},
             {0, {Range{0, 4}, Range{}}, {0, 4}, 0}};
  a.transfers = minimal_transfers(a.batch, a.tasks);
  ASSERT_TRUE(verify(a).ok()) << verify(a).summary();
  for (Pass pass : {Pass::kForward, Pass::kBackward}) {
    const Plan plan = compile(a, kHeads, pass, CommMode::kPingPong);
    ASSERT_TRUE(verify_plan(plan, a.batch).ok()) << verify_plan(plan, a.batch).summary();
    int reduces = 0;
    for (const auto& i : plan.programs[1].instructions) {
      if (const auto* r = std::get_if<Reduce>(&i.op)) {
        ++reduces;
        EXPECT_EQ(r->op, pass == Pass::kForward ? ReduceOp::kMerge : ReduceOp::kSum);
        EXPECT_EQ(r->parts.size(), 2u);
      }
    }
    EXPECT_EQ(reduces, 1) << "merge O+LSE (forward) or sum dQ (backward) of rows [4, 8); keys are each read once";
  }
}

TEST(Compile, PingPongPutsWorkWithoutTrafficAroundTheRemoteWork) {
  Assignment a;
  a.batch = pack_batch({{0, 64, MaskSpec::causal()}, {1, 64, MaskSpec::causal()}}, 2, 64);
  // Rank 0 computes its own document and half of rank 1's; rank 1 the other half.
  a.tasks = {{0, {Range{0, 64}, Range{}}, {0, 64}, 0},
             {1, {Range{0, 32}, Range{}}, {0, 64}, 0},
             {1, {Range{32, 64}, Range{}}, {0, 64}, 1}};
  const Plan plan = compile(a, kHeads, Pass::kForward, CommMode::kPingPong);
  ASSERT_TRUE(verify_plan(plan, a.batch).ok());
  std::string order;
  for (const auto& i : plan.programs[0].instructions) order += std::string(operation_name(i.op)) + " ";
  EXPECT_EQ(order, "launch copy copy copy attention wait attention launch wait copy copy ")
      << "local work first hides the dispatch";
  EXPECT_EQ(plan.mode, CommMode::kPingPong);
  EXPECT_EQ(plan.nano_batches, 2);
}

}  // namespace
}  // namespace fulcrum

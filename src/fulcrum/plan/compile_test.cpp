#include "fulcrum/plan/compile.hpp"

#include "fulcrum/core/error.hpp"
#include "fulcrum/plan/plan_test_cases.hpp"
#include "fulcrum/plan/program_verify.hpp"
#include "fulcrum/plan/stats.hpp"
#include "fulcrum/plan/verify.hpp"
#include "fulcrum/workload/limits.hpp"
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

const HeadLayout kGqa{8, 2, 16, 4};  // 8 q heads read 2 kv heads: groups of 4

// Every message of a plan, as "src->dst buffer xrows h[begin,end) bytes", with its byte count checked
// against rows * heads * values per head * element bytes, counted here from the buffer's field.
std::vector<std::string> messages_of(const Plan& plan) {
  std::vector<std::string> out;
  for (const auto& p : plan.programs) {
    for (const auto& i : p.instructions) {
      const auto* l = std::get_if<CommLaunch>(&i.op);
      if (!l) continue;
      for (const auto& m : l->sends) {
        const Field f = p.buffers[m.slice.buffer].field;
        const int width = is_kv_side(f) ? plan.heads.kv_heads : plan.heads.q_heads;
        const int heads = m.slice.heads.all() ? width : m.slice.heads.end - m.slice.heads.begin;
        const Tokens bytes =
            m.slice.rows * heads * (f == Field::kLse ? 1 : plan.heads.head_dim) *
            (f == Field::kLse || f == Field::kDQ || f == Field::kDK || f == Field::kDV ? 4 : plan.heads.dtype_bytes);
        EXPECT_EQ(plan.heads.bytes(f, m.slice), bytes) << p.buffers[m.slice.buffer].name;
        out.push_back(fmt::format("{}->{} {} x{} h[{},{}) {}", p.rank, m.peer, p.buffers[m.slice.buffer].name,
                                  m.slice.rows, m.slice.heads.begin, m.slice.heads.end, bytes));
      }
    }
  }
  return out;
}

// Two ranks, one document of 8 tokens (4 on each), q heads [0, split) computed on rank 1 and [split, 8)
// on rank 0: each server fetches its q heads of Q and the kv heads they read of K/V, and returns O and
// LSE of its q heads only. split 4 is one kv group per server; split 3 needs both kv heads on rank 0.
TEST(CompileHeads, MessagesCarryOnlyTheHeadsTheTasksNeed) {
  for (int split : {4, 3}) {
    Assignment a;
    a.q_heads = 8;
    a.batch = pack_batch({{0, 8, MaskSpec::full()}}, 2, 4);
    a.tasks = {{0, {Range{0, 8}, Range{}}, {0, 8}, 1, -1, {0, split}},
               {0, {Range{0, 8}, Range{}}, {0, 8}, 0, -1, {split, 8}}};
    a.transfers = minimal_transfers(a.batch, a.tasks, 4);
    ASSERT_TRUE(verify(a).ok()) << verify(a).summary();
    const Plan plan = compile(a, kGqa, Pass::kForward, CommMode::kSingleStream);
    ASSERT_TRUE(verify_plan(plan, a.batch).ok()) << verify_plan(plan, a.batch).summary();
    const std::vector<std::string> want = split == 4 ? std::vector<std::string>{"0->1 q x4 h[0,4) 1024",
                                                                                "0->1 k x4 h[0,1) 256",
                                                                                "0->1 v x4 h[0,1) 256",
                                                                                "0->1 ws0.remote.o x4 h[4,8) 1024",
                                                                                "0->1 ws0.remote.lse x4 h[4,8) 64",
                                                                                "1->0 q x4 h[4,8) 1024",
                                                                                "1->0 k x4 h[1,2) 256",
                                                                                "1->0 v x4 h[1,2) 256",
                                                                                "1->0 ws0.remote.o x4 h[0,4) 1024",
                                                                                "1->0 ws0.remote.lse x4 h[0,4) 64"}
                                                     : std::vector<std::string>{"0->1 q x4 h[0,3) 768",
                                                                                "0->1 k x4 h[0,1) 256",
                                                                                "0->1 v x4 h[0,1) 256",
                                                                                "0->1 ws0.remote.o x4 h[3,8) 1280",
                                                                                "0->1 ws0.remote.lse x4 h[3,8) 80",
                                                                                "1->0 q x4 h[3,8) 1280",
                                                                                "1->0 k x4 h[0,-1) 512",
                                                                                "1->0 v x4 h[0,-1) 512",
                                                                                "1->0 ws0.remote.o x4 h[0,3) 768",
                                                                                "1->0 ws0.remote.lse x4 h[0,3) 48"};
    EXPECT_EQ(messages_of(plan), want) << "split " << split;
  }
}

// GQA head splits on 2-4 ranks, both passes and schedules: every plan verifies, every message's bytes
// are its rows x heads (messages_of), the plans move less than the same messages would over whole
// rows, and a single-stream forward plan moves exactly the bytes compute_stats counts for the
// Assignment's transfers (minimal_transfers with the model's groups).
TEST(CompileHeads, GqaHeadSplitsMoveOnlyTheirHeadsAndTheCostModelAgrees) {
  const ModelShape model{"gqa", 1, 128, 8, 2, 16, 256, 4};
  for (int ranks : {2, 3, 4}) {
    for (int split : {4, 3}) {
      const Assignment a = testing::gqa_head_split_assignment(ranks, split);
      ASSERT_TRUE(verify(a).ok()) << verify(a).summary();
      for (Pass pass : {Pass::kForward, Pass::kBackward}) {
        for (CommMode mode : {CommMode::kPingPong, CommMode::kSingleStream}) {
          const Plan plan = compile(a, kGqa, pass, mode);
          const auto report = verify_plan(plan, a.batch);
          ASSERT_TRUE(report.ok()) << ranks << " ranks, split " << split << ": " << report.summary();
          messages_of(plan);
          EXPECT_LT(testing::message_bytes(plan), testing::message_bytes(plan, true));
          if (pass == Pass::kForward && mode == CommMode::kSingleStream) {
            EXPECT_DOUBLE_EQ(testing::message_bytes(plan), compute_stats(a, model).comm_bytes_total)
                << ranks << " ranks, split " << split;
          }
        }
      }
    }
  }
  // Plans without head ranges: the same agreement, over whole rows.
  for (std::uint64_t seed = 0; seed < 40; ++seed) {
    const Assignment a = testing::random_assignment(seed, MaskSpec::causal());
    const Plan plan = compile(a, kGqa, Pass::kForward, CommMode::kSingleStream);
    EXPECT_DOUBLE_EQ(testing::message_bytes(plan), testing::message_bytes(plan, true));
    EXPECT_DOUBLE_EQ(testing::message_bytes(plan), compute_stats(a, model).comm_bytes_total) << "seed " << seed;
  }
}

// verify_plan follows data per (row, head) once a plan cuts heads: a message that leaves out one head an
// item reads (send and receive shrunk alike, so the byte counts still match) is caught where the item
// reads it, and a send and receive over different heads are caught by their byte counts.
TEST(CompileHeads, VerifyPlanCatchesAMessageMissingAHeadAnItemReads) {
  const Assignment a = testing::gqa_head_split_assignment(3, 4);
  const Plan plan = compile(a, kGqa, Pass::kForward, CommMode::kSingleStream);
  ASSERT_TRUE(verify_plan(plan, a.batch).ok());
  auto shrink_q_message = [&](bool receive_too) {
    Plan broken = plan;
    for (auto& p : broken.programs) {
      for (auto& in : p.instructions) {
        auto* l = std::get_if<CommLaunch>(&in.op);
        if (!l) continue;
        for (auto& m : l->sends) {
          if (p.buffers[m.slice.buffer].field != Field::kQ || m.slice.heads.end - m.slice.heads.begin < 2) continue;
          m.slice.heads.end -= 1;
          if (!receive_too) return broken;
          for (auto& in2 : broken.programs[m.peer].instructions) {
            if (auto* l2 = std::get_if<CommLaunch>(&in2.op)) {
              for (auto& r : l2->receives) {
                if (r.peer == p.rank && r.tag == m.tag) r.slice.heads.end -= 1;
              }
            }
          }
          return broken;
        }
      }
    }
    ADD_FAILURE() << "no Q message over two or more heads";
    return broken;
  };
  const auto missing = verify_plan(shrink_q_message(true), a.batch);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.summary().find("should hold q of document"), std::string::npos) << missing.summary();
  const auto mismatched = verify_plan(shrink_q_message(false), a.batch);
  ASSERT_FALSE(mismatched.ok());
  EXPECT_NE(mismatched.summary().find("bytes sent"), std::string::npos) << mismatched.summary();
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

// The schedule cuts a server's work in halves by (head, query, key) triples. At the largest document with
// 32 heads one task holds 32 x 2^59 = 2^64 of them: in 64-bit integers both halves wrapped to 0 and both
// tasks went into the first nano-batch. The plan's shape must be the same as at 64 tokens.
TEST(Compile, HalvesAtTheLargestDocumentMatchASmallOne) {
  const HeadLayout heads{32, 8, 128, 2};
  auto instructions = [&](Tokens n) {
    Assignment a;
    a.batch = pack_batch({{0, n, MaskSpec::full()}}, 1, n);
    a.tasks = {{0, {Range{0, n / 2}, Range{}}, {0, n}, 0}, {0, {Range{n / 2, n}, Range{}}, {0, n}, 0}};
    const Plan plan = compile(a, heads, Pass::kForward, CommMode::kPingPong);
    std::string order;
    for (const auto& i : plan.programs[0].instructions) {
      order += fmt::format("{}@{} ", operation_name(i.op), i.stream);
    }
    return order;
  };
  EXPECT_EQ(instructions(kMaxDocumentTokens), instructions(64));
}

}  // namespace
}  // namespace fulcrum

#include "fulcrum/plan/program_verify.hpp"

#include "fulcrum/core/error.hpp"
#include "fulcrum/plan/compile.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <limits>
#include <string>
#include <utility>
#include <vector>

namespace fulcrum {
namespace {

// Two ranks, one document split over them, row [4, 8)'s keys split over both servers.
struct Fixture {
  Assignment a;
  Plan plan;
  Fixture(Pass pass, CommMode schedule) {
    a.batch = pack_batch({{0, 8, MaskSpec::causal()}, {1, 6, MaskSpec::causal()}}, 2, 7);
    a.tasks = {{0, {Range{4, 8}, Range{}}, {0, 4}, 0},
               {0, {Range{4, 8}, Range{}}, {4, 8}, 1},
               {0, {Range{0, 4}, Range{}}, {0, 4}, 1},
               {1, {Range{0, 6}, Range{}}, {0, 6}, 0}};
    a.transfers = minimal_transfers(a.batch, a.tasks);
    plan = compile(a, HeadLayout{2, 1, 8, 4}, pass, schedule);
  }
};

// Applies `mutate` to the first instruction of any rank for which it returns true.
void mutate_first(Plan& plan, const std::function<bool(Program&, std::size_t)>& mutate) {
  for (auto& p : plan.programs) {
    for (std::size_t i = 0; i < p.instructions.size(); ++i) {
      if (mutate(p, i)) return;
    }
  }
  FAIL() << "nothing to mutate";
}

std::string first_error(const Fixture& f) {
  const auto report = verify_plan(f.plan, f.a.batch);
  return report.ok() ? "valid" : report.errors.front();
}

TEST(VerifyPlan, TheUnmutatedPlansAreValid) {
  for (Pass pass : {Pass::kForward, Pass::kBackward}) {
    for (CommMode s : {CommMode::kPingPong, CommMode::kSingleStream}) EXPECT_EQ(first_error(Fixture(pass, s)), "valid");
  }
}

// One fused call may write the same rows over disjoint heads: the all-head item of a one-rank plan cut
// into items over heads [0, 1) and [1, 2) is still a valid plan; overlapping heads are not.
TEST(VerifyPlan, ItemsMayShareRowsOverDisjointHeads) {
  Assignment a;
  a.batch = pack_batch({{0, 8, MaskSpec::causal()}}, 1, 8);
  a.tasks = {{0, {Range{0, 8}, Range{}}, {0, 8}, 0}};
  Plan plan = compile(a, HeadLayout{2, 1, 8, 4}, Pass::kForward, CommMode::kSingleStream);
  auto cut = [&](HeadRange first, HeadRange second) {
    Plan p = plan;
    for (auto& in : p.programs[0].instructions) {
      if (auto* att = std::get_if<Attention>(&in.op)) {
        AttentionItem item = att->items.at(0);
        item.heads = first;
        att->items = {item, item};
        att->items[1].heads = second;
      }
    }
    return verify_plan(p, a.batch);
  };
  EXPECT_TRUE(cut({0, 1}, {1, 2}).ok()) << cut({0, 1}, {1, 2}).summary();
  const auto report = cut({0, 2}, {1, 2});
  ASSERT_FALSE(report.ok());
  // Head 1 computed twice: the per-head coverage check names it before the data flow runs.
  EXPECT_NE(report.summary().find("heads [1, 2) row 0: some key is computed more than once"), std::string::npos)
      << report.summary();
}

TEST(VerifyPlan, FindsAMissingReceive) {
  Fixture f(Pass::kForward, CommMode::kSingleStream);
  mutate_first(f.plan, [](Program& p, std::size_t i) {
    auto* l = std::get_if<CommLaunch>(&p.instructions[i].op);
    if (!l || l->receives.empty()) return false;
    l->receives.pop_back();
    return true;
  });
  EXPECT_NE(first_error(f).find("received (-1: missing)"), std::string::npos) << first_error(f);
}

TEST(VerifyPlan, FindsAMissingWaitAndAReadBeforeWrite) {
  Fixture f(Pass::kForward, CommMode::kSingleStream);
  mutate_first(f.plan, [](Program& p, std::size_t i) {
    if (!std::holds_alternative<CommWait>(p.instructions[i].op)) return false;
    p.instructions.erase(p.instructions.begin() + static_cast<std::ptrdiff_t>(i));
    return true;
  });
  EXPECT_NE(first_error(f).find("is never waited for"), std::string::npos) << first_error(f);
}

TEST(VerifyPlan, FindsADeadlock) {
  Fixture f(Pass::kForward, CommMode::kSingleStream);
  // Every rank waits for its dispatch before starting it: move each program's first wait to the front,
  // and the launch it waits for right after it. Waiting on an unstarted launch is malformed, so instead
  // split: rank r's receives stay in the launch, its sends move after the wait.
  for (auto& p : f.plan.programs) {
    auto& launch = std::get<CommLaunch>(p.instructions.front().op);
    CommLaunch sends{99, launch.sends, {}};
    launch.sends.clear();
    for (std::size_t i = 0; i < p.instructions.size(); ++i) {
      if (std::holds_alternative<CommWait>(p.instructions[i].op)) {
        p.instructions.insert(p.instructions.begin() + static_cast<std::ptrdiff_t>(i) + 1, {sends, 0});
        p.instructions.insert(p.instructions.begin() + static_cast<std::ptrdiff_t>(i) + 2, {CommWait{99}, 0});
        break;
      }
    }
  }
  EXPECT_NE(first_error(f).find("deadlock"), std::string::npos) << first_error(f);
}

// The posting order (program.hpp, CommLaunch): a launch that sends two messages to one peer in the order
// opposite to the one in which the peer's launch receives them still matches by tag (MPI, gloo), but NCCL
// would pair the first send with the first receive: verify_plan refuses it, naming the ranks, the
// launches and the tags. Swapping the receives too gives an order both sides agree on, which is valid.
TEST(VerifyPlan, FindsSendsPostedInAnotherOrderThanTheirReceives) {
  for (Pass pass : {Pass::kForward, Pass::kBackward}) {
    for (CommMode mode : {CommMode::kSingleStream, CommMode::kPingPong}) {
      Fixture f(pass, mode);
      int src = -1, dst = -1, first = -1, second = -1;  // the two swapped messages' ranks and tags
      mutate_first(f.plan, [&](Program& p, std::size_t i) {
        auto* l = std::get_if<CommLaunch>(&p.instructions[i].op);
        if (!l) return false;
        for (std::size_t a = 0; a < l->sends.size(); ++a) {
          for (std::size_t b = a + 1; b < l->sends.size(); ++b) {
            if (l->sends[a].peer != l->sends[b].peer) continue;
            std::swap(l->sends[a], l->sends[b]);
            src = p.rank, dst = l->sends[a].peer, first = l->sends[b].tag, second = l->sends[a].tag;
            return true;
          }
        }
        return false;
      });
      ASSERT_GE(src, 0);
      const auto report = verify_plan(f.plan, f.a.batch);
      ASSERT_FALSE(report.ok());
      EXPECT_EQ(report.errors.size(), 1u) << report.summary();  // nothing but the order is wrong
      const std::string& error = report.errors.front();
      EXPECT_EQ(error.rfind(fmt::format("posting order {} -> {}: rank {}'s send posting #", src, dst, src), 0), 0u)
          << error;
      EXPECT_NE(error.find(fmt::format("but rank {}'s receive posting #", dst)), std::string::npos) << error;
      EXPECT_NE(error.find(fmt::format(", {}", first)), std::string::npos) << error;
      EXPECT_EQ(posting_order_errors(f.plan), report.errors);

      for (auto& in : f.plan.programs[dst].instructions) {  // the receiver agrees: a valid order again
        auto* l = std::get_if<CommLaunch>(&in.op);
        if (!l) continue;
        auto at = [&](int tag) {
          return std::find_if(l->receives.begin(), l->receives.end(),
                              [&](const Message& m) { return m.peer == src && m.tag == tag; });
        };
        if (at(first) != l->receives.end() && at(second) != l->receives.end()) std::iter_swap(at(first), at(second));
      }
      EXPECT_TRUE(verify_plan(f.plan, f.a.batch).ok()) << verify_plan(f.plan, f.a.batch).summary();
    }
  }
}

// The rule on its own, on launches alone: rank 0 sends tag 0 in its first launch and tag 1 in its second.
// Rank 1 receiving them in that order, launch for launch, is the posting order; receiving them crossed
// (tag 1 first), or both in one launch (NCCL would pair one send of tag 0 with one receive of both, of
// another size), is not. Errors name the pair, the posting, and each side's launch and tags.
TEST(VerifyPlan, PostingOrderErrorsNameRanksLaunchesAndTags) {
  auto plan_with = [](std::vector<std::vector<int>> received) {
    Plan plan;
    plan.programs.resize(2);
    plan.programs[1].rank = 1;
    for (int tag = 0; tag < 2; ++tag) {
      plan.programs[0].instructions.push_back({CommLaunch{tag, {{1, tag, {}}}, {}}, 0});
    }
    for (std::size_t id = 0; id < received.size(); ++id) {
      CommLaunch l{static_cast<int>(10 + id), {}, {}};
      for (int tag : received[id]) l.receives.push_back({0, tag, {}});
      plan.programs[1].instructions.push_back({l, 0});
    }
    return plan;
  };
  EXPECT_TRUE(posting_order_errors(plan_with({{0}, {1}})).empty());
  EXPECT_EQ(posting_order_errors(plan_with({{1}, {0}})),
            std::vector<std::string>{"posting order 0 -> 1: rank 0's send posting #1 to rank 1 is launch 0's messages "
                                     "with tags [0], but rank 1's receive posting #1 from rank 0 is launch 10's "
                                     "messages with tags [1]; NCCL pairs the two, so they must carry the same "
                                     "messages in the same order"});
  EXPECT_EQ(posting_order_errors(plan_with({{0, 1}})),
            std::vector<std::string>{"posting order 0 -> 1: rank 0's send posting #1 to rank 1 is launch 0's messages "
                                     "with tags [0], but rank 1's receive posting #1 from rank 0 is launch 10's "
                                     "messages with tags [0, 1]; NCCL pairs the two, so they must carry the same "
                                     "messages in the same order"});
  const auto missing = posting_order_errors(plan_with({{0}}));
  ASSERT_EQ(missing.size(), 1u);
  EXPECT_NE(missing[0].find("send posting #2 to rank 1 is launch 1's messages with tags [1], but rank 1's receive "
                            "posting #2 from rank 0 is nothing (it has only 1)"),
            std::string::npos)
      << missing[0];
}

TEST(VerifyPlan, FindsAnItemReadingTheWrongKeys) {
  Fixture f(Pass::kForward, CommMode::kPingPong);
  // Shift the rows a K/V copy reads by one: the call then sees a neighbour token's key.
  mutate_first(f.plan, [](Program& p, std::size_t i) {
    auto* c = std::get_if<Copy>(&p.instructions[i].op);
    if (!c || p.buffers[c->src.buffer].name != "k") return false;
    c->src.row += (c->src.row + c->src.rows < p.buffers[c->src.buffer].rows) ? 1 : -1;
    return c->src.row >= 0;
  });
  EXPECT_NE(first_error(f).find("should hold k of document"), std::string::npos) << first_error(f);
}

TEST(VerifyPlan, FindsALostPartialResult) {
  for (Pass pass : {Pass::kForward, Pass::kBackward}) {
    Fixture f(pass, CommMode::kPingPong);
    mutate_first(f.plan, [](Program& p, std::size_t i) {
      auto* r = std::get_if<Reduce>(&p.instructions[i].op);
      if (!r || r->parts.size() < 2) return false;
      r->parts.pop_back();
      if (!r->part_lse.empty()) r->part_lse.pop_back();
      return true;
    });
    EXPECT_NE(first_error(f).find("contributions reached the owner"), std::string::npos) << first_error(f);
  }
}

TEST(VerifyPlan, FindsAnOutputReducedTwice) {
  Fixture f(Pass::kForward, CommMode::kSingleStream);
  mutate_first(f.plan, [](Program& p, std::size_t i) {
    if (!std::holds_alternative<Reduce>(p.instructions[i].op)) return false;
    p.instructions.push_back(p.instructions[i]);
    return true;
  });
  EXPECT_NE(first_error(f).find("already holds results"), std::string::npos) << first_error(f);
}

TEST(VerifyPlan, FindsACallReadingRowsAPendingReceiveWrites) {
  Fixture f(Pass::kForward, CommMode::kPingPong);
  // Run the attention call that follows a wait before that wait.
  mutate_first(f.plan, [](Program& p, std::size_t i) {
    if (i + 1 >= p.instructions.size() || !std::holds_alternative<CommWait>(p.instructions[i].op) ||
        !std::holds_alternative<Attention>(p.instructions[i + 1].op)) {
      return false;
    }
    std::swap(p.instructions[i], p.instructions[i + 1]);
    return true;
  });
  EXPECT_NE(first_error(f).find("is still receiving into them"), std::string::npos) << first_error(f);
}

TEST(VerifyPlan, FindsOperandsOfDifferentLengthsAndBadOwnedRows) {
  Fixture f(Pass::kForward, CommMode::kSingleStream);
  mutate_first(f.plan, [](Program& p, std::size_t) {
    const int o = p.find_buffer("ws0.remote.o");
    if (o < 0) return false;
    p.buffers[o].rows += 1;
    return true;
  });
  EXPECT_NE(first_error(f).find("operand 'ws0.remote.o' has"), std::string::npos) << first_error(f);
  Fixture g(Pass::kForward, CommMode::kSingleStream);
  g.plan.programs[1].owned.front().row = 1000;
  EXPECT_NE(first_error(g).find("leave buffer"), std::string::npos) << first_error(g);
}

TEST(VerifyPlan, FindsMissingCoverage) {
  Fixture f(Pass::kBackward, CommMode::kSingleStream);
  mutate_first(f.plan, [](Program& p, std::size_t i) {
    auto* a = std::get_if<AttentionBackward>(&p.instructions[i].op);
    if (!a || a->items.size() < 2) return false;
    a->items.pop_back();
    return true;
  });
  EXPECT_NE(first_error(f).find("coverage"), std::string::npos) << first_error(f);
}

// Plans from outside: verify_plan without a batch checks a plan against its own documents and owners, so
// a compiled plan passes it and require_valid_plan lets it through.
TEST(VerifyPlan, APlanVerifiesAgainstItsOwnDocumentsAndOwners) {
  for (Pass pass : {Pass::kForward, Pass::kBackward}) {
    const Fixture f(pass, CommMode::kPingPong);
    EXPECT_TRUE(verify_plan(f.plan).ok()) << verify_plan(f.plan).summary();
    EXPECT_NO_THROW(require_valid_plan(f.plan));
    const Batch own = plan_batch(f.plan);
    ASSERT_EQ(own.segments.size(), f.a.batch.segments.size());
    for (std::size_t i = 0; i < own.segments.size(); ++i) {
      EXPECT_EQ(own.segments[i].rank, f.a.batch.segments[i].rank);
      EXPECT_EQ(own.segments[i].tokens, f.a.batch.segments[i].tokens);
    }
  }
}

TEST(VerifyPlan, RequireValidPlanIsBadInputNamingTheProblem) {
  Fixture f(Pass::kForward, CommMode::kPingPong);
  f.plan.programs[1].instructions.clear();
  try {
    require_valid_plan(f.plan, "plan.fcpl");
    FAIL() << "a broken plan passed";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kBadInput);
    EXPECT_EQ(std::string(e.what()).rfind("plan.fcpl: fails verify_plan, so it is not run: ", 0), 0u) << e.what();
  }
}

// Values a corrupt file can hold, each reported (never a crash, an overflow or an exception): head counts
// GQA cannot split or that are zero, a dtype, streams, buffer rows that are negative or huge, slices and
// spans whose sums overflow, and documents of no tokens.
TEST(VerifyPlan, CorruptValuesAreReportedNotCrashedOn) {
  constexpr Tokens kHuge = std::numeric_limits<Tokens>::max() - 2;
  const std::vector<std::pair<std::function<void(Plan&)>, std::string>> cases = {
      {[](Plan& p) { p.heads.q_heads = 0; }, "heads: q_heads = 0"},
      {[](Plan& p) { p.heads.kv_heads = 0; }, "kv_heads = 0"},
      {[](Plan& p) { p.heads.kv_heads = 3; }, "kv_heads dividing q_heads"},
      {[](Plan& p) { p.heads.head_dim = 1 << 30; }, "heads.head_dim"},
      {[](Plan& p) { p.heads.dtype_bytes = 3; }, "heads.dtype_bytes = 3"},
      {[](Plan& p) { p.nano_batches = 0; }, "nano_batches = 0"},
      {[](Plan& p) { p.programs[0].instructions[0].stream = 7; }, "stream 7"},
      {[](Plan& p) { p.programs[0].buffers[0].rows = -5; }, "has -5 rows"},
      {[](Plan& p) { p.programs[0].buffers[0].rows = kHuge; }, "rows: must be in [0, 268435456]"},
      {[](Plan& p) { p.programs[1].buffers[0].rows = kMaxPlanCells; }, "more than verify_plan checks"},
      {[](Plan& p) { p.documents[0].length = 0; }, "documents[0].length = 0"},
      {[](Plan& p) { p.documents[1].head_masks = {MaskSpec::causal()}; }, "documents[1].head_masks: 1 masks"},
      {[](Plan& p) {
         p.programs[0].owned[0].tokens = {5, kHuge};
       },
       "leave the document"},
      {[](Plan& p) {
         for (auto& in : p.programs[0].instructions) {
           if (auto* c = std::get_if<CommLaunch>(&in.op); c && !c->sends.empty()) c->sends[0].slice.row = kHuge;
         }
       },
       "is out of range"},
      {[](Plan& p) {
         for (auto& in : p.programs[0].instructions) {
           if (auto* a = std::get_if<Attention>(&in.op)) a->items[0].keys.position = kHuge;
         }
       },
       "leaves its buffers or the document"},
      // "All heads" spelt other than {0, -1}: it would verify yet re-encode differently (fuzz/plan_binary_fuzz).
      {[](Plan& p) {
         for (auto& in : p.programs[0].instructions) {
           if (auto* a = std::get_if<Attention>(&in.op)) a->items[0].heads = {0, -7};
         }
       },
       "has heads [0, -7)"},
      {[](Plan& p) {
         for (auto& prog : p.programs) {
           for (auto& in : prog.instructions) {
             if (auto* r = std::get_if<Reduce>(&in.op); r && r->op == ReduceOp::kSum) r->out_lse.heads = {0, -9};
           }
         }
       },
       "a sum has LSE operands"},
  };
  for (const auto& [mutate, needle] : cases) {
    int mutated = 0;
    for (Pass pass : {Pass::kForward, Pass::kBackward}) {
      Fixture f(pass, CommMode::kPingPong);
      const Plan original = f.plan;
      mutate(f.plan);
      if (f.plan == original) continue;  // e.g. a sum, which only the backward pass has
      ++mutated;
      for (const VerifyReport& report : {verify_plan(f.plan), verify_plan(f.plan, f.a.batch)}) {
        ASSERT_FALSE(report.ok()) << needle;
        EXPECT_NE(report.summary().find(needle), std::string::npos)
            << "wanted '" << needle << "' in " << report.summary();
      }
    }
    EXPECT_GT(mutated, 0) << needle;
  }
}

}  // namespace
}  // namespace fulcrum

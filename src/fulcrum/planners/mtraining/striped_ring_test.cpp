#include "fulcrum/planners/mtraining/striped_ring.hpp"

#include "fulcrum/core/error.hpp"
#include "fulcrum/plan/compile.hpp"
#include "fulcrum/plan/step_stats.hpp"
#include "fulcrum/plan/verify.hpp"

#include <gtest/gtest.h>

namespace fulcrum {
namespace {

PlannerOptions options(int devices_per_machine = 8) {
  PlannerOptions o;
  o.model = model_shape_preset("tiny");
  o.devices_per_machine = devices_per_machine;
  return o;
}

Batch one_document(int ranks, Tokens length, const MaskSpec& mask, std::vector<MaskSpec> head_masks = {}) {
  return pack_batch({{7, length, mask, std::move(head_masks)}}, ranks, length / ranks);
}

TEST(StripedRing, StoresEachDocumentStripedAndRunsEveryRankPairOnTheRing) {
  const auto vs = MaskSpec::vertical_slash_blocks(64, {0, 300}, {0, 1, 6});
  const std::vector<MaskSpec> heads(static_cast<std::size_t>(model_shape_preset("tiny").q_heads), vs);
  const Batch batch = one_document(4, 2048, MaskSpec::causal(), heads);
  const Assignment a = make_planner("mtraining", options())->plan(batch);
  ASSERT_EQ(a.batch.documents.size(), 1u);
  EXPECT_EQ(a.batch.documents[0].mask, MaskSpec::striped(MaskSpec::causal(), 4, 64));
  for (const auto& m : a.batch.documents[0].head_masks) EXPECT_EQ(m, MaskSpec::striped(vs, 4, 64));
  ASSERT_EQ(a.batch.segments.size(), 4u);
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(a.batch.segments[r].rank, r);
    EXPECT_EQ(a.batch.segments[r].tokens, (Range{512 * r, 512 * (r + 1)}));
  }
  EXPECT_EQ(a.tasks.size(), 16u);
  EXPECT_EQ(a.ring_node_ranks, 4);  // one machine: a flat ring
  EXPECT_TRUE(verify(a).ok()) << verify(a).summary();
  // Token-striped: blocks of one token.
  const Assignment s = make_planner("striped", options())->plan(batch);
  EXPECT_EQ(s.batch.documents[0].mask, MaskSpec::striped(MaskSpec::causal(), 4, 1));
}

TEST(StripedRing, HierarchicalAcrossMachinesAndBadInputNamesTheField) {
  const Batch batch = one_document(8, 4096, MaskSpec::causal());
  EXPECT_EQ(make_planner("mtraining", options(4))->plan(batch).ring_node_ranks, 4);
  EXPECT_EQ(make_planner("mtraining", options(4).set("mtraining-hierarchical", 0))->plan(batch).ring_node_ranks, 8);
  auto bad_input = [](const std::function<void()>& body, const std::string& text) {
    try {
      body();
      ADD_FAILURE() << "no error, expected " << text;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kBadInput);
      EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
    }
  };
  bad_input([&] { make_planner("mtraining", options(3))->plan(batch); }, "devices-per-machine");
  bad_input([&] { make_planner("mtraining", options())->plan(one_document(8, 8 * 96, MaskSpec::causal())); },
            "mtraining-block");
  bad_input([&] { make_planner("mtraining", options().set("mtraining-block", 0)); }, "mtraining-block");
}

// Why MTraining stripes: a slash pattern's work spreads evenly over ranks and ring steps under
// block striping, and piles up on the contiguous ring's later ranks and diagonal steps.
TEST(StripedRing, BlockStripingBalancesSlashesOverRanksAndSteps) {
  const auto vs = MaskSpec::vertical_slash_blocks(64, {0, 17}, {0, 1, 9, 33, 70});
  const Batch batch = one_document(4, 16384, vs);
  const HeadLayout heads = head_layout(model_shape_preset("tiny"), 4);
  auto balance = [&](const char* planner) {
    const Assignment a = make_planner(planner, options())->plan(batch);
    return step_balance(plan_steps(compile(a, heads, Pass::kForward, CommMode::kSingleStream)).flops);
  };
  const StepBalance striped = balance("mtraining"), ring = balance("ring"), zigzag = balance("zigzag");
  EXPECT_LT(striped.worker, 1.02);
  EXPECT_LT(striped.step_sync, ring.step_sync);
  EXPECT_LT(striped.step_sync, zigzag.step_sync);
  EXPECT_LT(striped.worker, ring.worker);
}

}  // namespace
}  // namespace fulcrum

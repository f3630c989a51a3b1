#include "fulcrum/plan/step_stats.hpp"

#include "fulcrum/plan/compile.hpp"
#include "fulcrum/plan/plan_test_cases.hpp"
#include "fulcrum/plan/stats.hpp"

#include <gtest/gtest.h>

#include <numeric>

namespace fulcrum {
namespace {

TEST(StepBalance, WorkerAndStepImbalanceByHand) {
  // Rank 0 works 4 then 0, rank 1 works 2 then 2: equal totals, unequal steps.
  const auto b = step_balance({{4, 0}, {2, 2}});
  EXPECT_DOUBLE_EQ(b.worker, 1.0);
  EXPECT_DOUBLE_EQ(b.step_mean, (2.0 + 1.0) / 2);        // rank 0: 4 / 2; rank 1: 2 / 2
  EXPECT_DOUBLE_EQ(b.step_sync, (4.0 + 2.0) / (3 + 1));  // step maxima over step means
  EXPECT_DOUBLE_EQ(step_balance({{1, 1}, {1, 1}}).step_sync, 1.0);
  EXPECT_DOUBLE_EQ(step_balance({{0, 0}, {0, 0}}).worker, 1.0);
}

TEST(PlanSteps, ForwardFlopsAddUpToTheAssignmentsAndStepsAreTheRing) {
  for (std::uint64_t seed = 0; seed < 8; ++seed) {
    Assignment a = testing::random_assignment(seed, MaskSpec::causal(), 4);
    a.tasks.clear();
    for (const auto& rows : a.batch.segments) {
      for (const auto& keys : a.batch.segments_of(rows.doc))
        a.tasks.push_back({rows.doc, {rows.tokens, Range{}}, keys.tokens, rows.rank});
    }
    a.ring_node_ranks = a.batch.ranks;
    const HeadLayout heads{4, 2, 16, 4};
    const Plan plan = compile(a, heads, Pass::kForward, CommMode::kSingleStream);
    const PlanSteps steps = plan_steps(plan);
    ASSERT_EQ(steps.flops.size(), static_cast<std::size_t>(a.batch.ranks));
    ModelShape model = model_shape_preset("tiny");
    model.q_heads = heads.q_heads;
    model.kv_heads = heads.kv_heads;
    model.head_dim = heads.head_dim;
    const auto stats = compute_stats(a, model);
    for (int r = 0; r < a.batch.ranks; ++r) {
      ASSERT_EQ(steps.flops[r].size(), static_cast<std::size_t>(a.batch.ranks)) << "one column per ring step";
      const double total = std::accumulate(steps.flops[r].begin(), steps.flops[r].end(), 0.0);
      EXPECT_NEAR(total, stats.rank_flops[r], 1e-9 * (1 + stats.rank_flops[r])) << "seed " << seed << " rank " << r;
      // Step 0 is a rank's own keys: under a causal mask every row sees its own token, so it is active.
      if (total > 0) {
        EXPECT_GT(steps.active_tiles[r][0], 0);
      }
    }
    // Without tiles (what the simulator asks for): the same FLOPs and bytes, no tile counted.
    const PlanSteps untiled = plan_steps(plan, 0);
    EXPECT_EQ(untiled.flops, steps.flops) << "seed " << seed;
    EXPECT_EQ(untiled.bytes_sent, steps.bytes_sent) << "seed " << seed;
    for (const auto& row : untiled.active_tiles) EXPECT_EQ(std::accumulate(row.begin(), row.end(), 0.0), 0.0);
  }
}

}  // namespace
}  // namespace fulcrum

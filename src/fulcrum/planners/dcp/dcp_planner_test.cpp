#include "fulcrum/planners/dcp/dcp_planner.hpp"

#include "fulcrum/plan/compile.hpp"
#include "fulcrum/plan/program_verify.hpp"
#include "fulcrum/plan/stats.hpp"
#include "fulcrum/plan/verify.hpp"
#include "fulcrum/workload/length_source.hpp"
#include "fulcrum/workload/mask_test_cases.hpp"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace fulcrum

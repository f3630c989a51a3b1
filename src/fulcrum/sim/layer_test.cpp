// One layer's pass: the fixed work it adds beside the attention Program.
#include "fulcrum/sim/layer.hpp"

#include "fulcrum/cost/model_cost.hpp"
#include "fulcrum/sim/auto_choice.hpp"
#include "fulcrum/workload/model_config.hpp"

#include <gtest/gtest.h>

namespace fulcrum::sim {
namespace {

// MTraining's estimator runs in the forward layer, before the attention, on the ranks that own an estimated
// document's keys: forward matrix-stream work grows by exactly layer_estimator_s, backward not at all, a
// document too short to estimate costs nothing, and on a 32K document the estimator is a small fraction of
// the dense causal attention it prunes (its logits are 64 rows against the keys, not every row).
TEST(Layer, MTrainingsEstimatorAddsForwardWorkOnTheKeysOwners) {
  PlannerOptions options;
  options.model = model_shape_preset("llama3-8b");
  const Tokens lengths[] = {32768, 40, 32728};  // 4 ranks of 16K: long, too short to estimate (< 64), long
  int next = 0;
  const Batch batch = BatchStream([&] { return lengths[next++ % 3]; }, 4, 16384).next();
  const Assignment a = plan_verified(*make_planner("packed", options), batch);
  const LayerSetup plain = gpu_per_rank(options.model, "h200-dgx", CommMode::kSingleStream);
  LayerSetup sparse = plain;
  sparse.dynamic_mask = sparse::parse_dynamic_mask("vslash-dynamic:0.9");
  ASSERT_TRUE(sparse.dynamic_mask);
  EXPECT_EQ(layer_estimator_s(a, plain, 0), 0);

  const PassTimes f0 = simulate_pass(a, plain, Pass::kForward), f1 = simulate_pass(a, sparse, Pass::kForward);
  const PassTimes b0 = simulate_pass(a, plain, Pass::kBackward), b1 = simulate_pass(a, sparse, Pass::kBackward);
  for (int r = 0; r < a.batch.ranks; ++r) {
    const double estimator = layer_estimator_s(a, sparse, r);
    EXPECT_GT(estimator, 0) << "rank " << r;  // every rank holds a piece of a long document
    EXPECT_NEAR(f1.linear_s[r] - f0.linear_s[r], estimator, 1e-15) << "rank " << r;
    EXPECT_EQ(b1.linear_s[r], b0.linear_s[r]) << "rank " << r;
  }
  // The 40-token document adds nothing: rank 2's estimator is that of its long pieces alone.
  double pieces_s = 0;
  for (const auto& s : a.batch.segments) {
    if (s.rank != 2 || a.batch.documents[s.doc].length == 40) continue;
    const double k = static_cast<double>(s.tokens.size());
    const ModelShape& m = options.model;
    pieces_s += plain.group.attention_forward_s(64, s.tokens.size(), 2 * 64 * k * m.head_dim * m.q_heads) +
                plain.group.copy_s(3 * 4 * 64 * k * m.q_heads) + plain.group.overheads.attention_call_s(1, false);
  }
  EXPECT_NEAR(layer_estimator_s(a, sparse, 2), pieces_s, 1e-15);
  // Against the first document's dense causal forward attention on rank 0: a few percent at most.
  const ModelShape& m = options.model;
  const double dense_s = plain.group.attention_forward_s(16384, 16384, 2.0 * 16384 * 16384 * m.head_dim * m.q_heads);
  EXPECT_LT(layer_estimator_s(a, sparse, 0), 0.05 * dense_s);
}

}  // namespace
}  // namespace fulcrum::sim

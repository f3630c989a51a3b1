#include "fulcrum/planners/distca/rehome.hpp"

#include "fulcrum/plan/stats.hpp"
#include "fulcrum/plan/verify.hpp"
#include "fulcrum/planners/distca/scheduler.hpp"
#include "fulcrum/planners/planner.hpp"
#include "fulcrum/workload/length_source.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

namespace fulcrum::distca {
namespace {

struct Planned {
  Assignment assignment;
  AssignmentStats stats;
  double busiest_bytes = 0;  // the most any rank sends + receives
};

Planned compiled(const ModelShape& model, const Batch& batch, const std::vector<Item>& items) {
  Planned p{items_to_assignment(batch, items), {}, 0};
  p.stats = compute_stats(p.assignment, model);
  for (std::size_t r = 0; r < p.stats.rank_bytes_sent.size(); ++r) {
    p.busiest_bytes = std::max(p.busiest_bytes, p.stats.rank_bytes_sent[r] + p.stats.rank_bytes_received[r]);
  }
  return p;
}

TEST(DistcaRehome, NeverRaisesTheBusiestRanksOrTotalBytesPastTheBudgetAndKeepsTheTolerance) {
  // Random batches from both datasets and a synthetic source, 4-64 ranks, both tolerances, no byte budget
  // and 1%: whatever the pass keeps, the compiled plan's busiest rank does not rise and its total bytes not
  // past the budget, the pass counts each rank's bytes as minimal_transfers sends them, the loads it
  // reports are the items', and the plan verifies.
  const auto model = model_shape_preset("llama3-8b");
  int moved = 0;
  int batches = 0;
  for (const std::string spec : {"pretrain", "prolong", "lognormal:8:1.5"}) {
    for (const int ranks : {4, 16, 64}) {
      for (const double tolerance : {0.1, 0.02}) {
        for (const double budget : {0.0, 0.01}) {
          auto source = make_length_source(spec, static_cast<std::uint64_t>(ranks), 16384);
          const Batch batch = BatchStream([&] { return source->next(); }, ranks, 16384).next();
          ScheduleResult result = schedule(batch, model,
                                           {.tolerance = tolerance,
                                            .granularity = 128,
                                            .overshoot = 0.9,
                                            .partial_kv = false,
                                            .busiest_first = 0.5});
          const Planned before = compiled(model, batch, result.items);
          const double before_imbalance = max_over_mean(result.server_flops);
          moved += rehome_busiest_ranks(batch, model, result.items, result.server_flops, {tolerance, budget});
          const Planned after = compiled(model, batch, result.items);
          const std::string at = spec + " ranks " + std::to_string(ranks) + " tolerance " + std::to_string(tolerance) +
                                 " budget " + std::to_string(budget);
          EXPECT_LE(after.busiest_bytes, before.busiest_bytes * (1 + 1e-9)) << at;
          EXPECT_LE(after.stats.comm_bytes_total, before.stats.comm_bytes_total * (1 + budget + 1e-9)) << at;
          EXPECT_LE(max_over_mean(result.server_flops), std::max(1 + tolerance, before_imbalance) + 1e-9) << at;
          EXPECT_NEAR(after.stats.imbalance, max_over_mean(result.server_flops), 1e-9) << at;
          const std::vector<double> counted = rank_traffic(batch, model, result.items);
          for (int r = 0; r < ranks; ++r) {
            const double actual = after.stats.rank_bytes_sent[r] + after.stats.rank_bytes_received[r];
            EXPECT_NEAR(counted[r], actual, 1e-9 * std::max(1.0, actual)) << at << " rank " << r;
          }
          const VerifyReport report = verify(after.assignment);
          EXPECT_TRUE(report.ok()) << at << ": " << report.summary();
          ++batches;
        }
      }
    }
  }
  EXPECT_GT(moved, 0) << "the pass never moved anything on " << batches << " batches";
}

// A natural batch (64K tokens per rank of pretrain) scheduled as the planner does, re-homed with `budget`.
struct Rehomed {
  Planned before, after;
  int kept = 0;  // sets of moves
};
Rehomed rehome_natural(int ranks, std::uint64_t seed, double tolerance, double budget) {
  const auto model = model_shape_preset("llama3-8b");
  auto source = make_length_source("pretrain", seed, 65536);
  const Batch batch = BatchStream([&] { return source->next(); }, ranks, 65536).next();
  ScheduleResult result = schedule(
      batch, model,
      {.tolerance = tolerance, .granularity = 128, .overshoot = 0.9, .partial_kv = false, .busiest_first = 0.5});
  Rehomed r{compiled(model, batch, result.items), {}, 0};
  r.kept = rehome_busiest_ranks(batch, model, result.items, result.server_flops, {tolerance, budget});
  r.after = compiled(model, batch, result.items);
  EXPECT_LE(r.after.stats.imbalance, 1 + tolerance + 1e-9);
  return r;
}

TEST(DistcaRehome, TakesTheBusiestRanksTrafficDownOnANaturalBatch) {
  // 128 ranks, seed 1, ε 0.1, no byte budget (docs/results/2026-11-distca-traffic.md): traffic imbalance 1.95 -> 1.65
  // measured, total bytes slightly lower.
  const Rehomed r = rehome_natural(128, 1, 0.1, 0);
  EXPECT_GT(r.kept, 0);
  EXPECT_LT(r.after.stats.traffic_imbalance, 0.95 * r.before.stats.traffic_imbalance);
  EXPECT_LE(r.after.stats.comm_bytes_total, r.before.stats.comm_bytes_total);
}

TEST(DistcaRehome, ABytesBudgetLetsItTakeTheBusiestRankFurtherDown) {
  // 512 ranks, seed 1, ε 0.02 (docs/results/2026-11-distca-traffic.md): without a budget the busiest rank stays where
  // the loop left it (2.27x the mean); with 1% more bytes allowed it falls to 2.02x, and the total rises 0.1%.
  const Rehomed none = rehome_natural(512, 1, 0.02, 0);
  const Rehomed some = rehome_natural(512, 1, 0.02, 0.01);
  EXPECT_LT(some.after.stats.traffic_imbalance, 0.95 * none.after.stats.traffic_imbalance);
  EXPECT_LE(some.after.stats.comm_bytes_total, 1.01 * some.before.stats.comm_bytes_total);
}

}  // namespace
}  // namespace fulcrum::distca

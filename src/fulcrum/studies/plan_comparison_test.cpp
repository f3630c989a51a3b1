#include "fulcrum/studies/plan_comparison.hpp"

#include "fulcrum/core/error.hpp"
#include "fulcrum/sim/training.hpp"
#include "fulcrum/studies/attention_job.hpp"
#include "fulcrum/workload/length_source.hpp"

#include <gtest/gtest.h>

#include <set>

namespace fulcrum::studies {
namespace {

bool same_tasks(const Assignment& x, const Assignment& y) {
  if (x.tasks.size() != y.tasks.size() || x.batch.segments.size() != y.batch.segments.size()) return false;
  for (std::size_t i = 0; i < x.tasks.size(); ++i) {
    const auto &a = x.tasks[i], &b = y.tasks[i];
    if (a.doc != b.doc || a.queries != b.queries || a.keys != b.keys || a.server != b.server) return false;
  }
  for (std::size_t i = 0; i < x.batch.segments.size(); ++i) {
    const auto &a = x.batch.segments[i], &b = y.batch.segments[i];
    if (a.doc != b.doc || a.tokens != b.tokens || a.rank != b.rank) return false;
  }
  return true;
}

// `fulcrum plan --planners wlb`, `fulcrum run --planners wlb` and `fulcrum simulate --systems wlb` give
// the planner the same options for the same inputs (here: cp 2 and a token cap of 2), so they plan the
// same CP groups and the same tasks for the same batch.
TEST(SamePlanEverywhere, WlbPlansTheSameForPlanRunAndSimulate) {
  PlanConfig plan;
  plan.model = "tiny";
  plan.options.set("cp-degree", 2).set("wlb-token-cap", 2);
  JobConfig run;
  run.model = "tiny";
  run.planner = "wlb";
  run.options.set("cp-degree", 2).set("wlb-token-cap", 2);
  sim::TrainingConfig simulate;
  simulate.planner = "wlb";
  simulate.parallel = {.gpus = 8, .tp = 1, .pp = 1, .cp = 2, .microbatches = 0};
  simulate.tokens_per_rank = 2048;
  simulate.planner_options.set("wlb-token-cap", 2);
  const auto simulated =
      sim::training_planner_options(simulate, model_shape_preset("tiny"), hardware_preset("h200-dgx"));

  auto source = make_length_source("pretrain", 7, 2048);
  BatchStream stream([&] { return source->next(); }, 8, 2048);
  for (int b = 0; b < 3; ++b) {
    const Batch batch = stream.next();
    const Assignment from_plan = make_planner("wlb", plan.planner_options())->plan(batch);
    const Assignment from_run = make_planner("wlb", run.planner_options())->plan(batch);
    const Assignment from_simulate = make_planner("wlb", simulated)->plan(batch);
    EXPECT_TRUE(same_tasks(from_plan, from_run)) << "batch " << b;
    EXPECT_TRUE(same_tasks(from_plan, from_simulate)) << "batch " << b;
    // CP groups of 2: every document's rows are spread over the two ranks of one group.
    std::set<std::pair<int, int>> doc_ranks;
    for (const auto& s : from_plan.batch.segments) doc_ranks.insert({s.doc, s.rank});
    EXPECT_EQ(doc_ranks.size(), 2 * from_plan.batch.documents.size()) << "batch " << b;
    for (const auto& s : from_plan.batch.segments) {
      for (const auto& t : from_plan.batch.segments) {
        if (s.doc == t.doc) {
          EXPECT_EQ(s.rank / 2, t.rank / 2);
        }
      }
    }
  }
}

// `fulcrum plan --planners auto`: a row per batch's chosen plan, verified, whose balance is the chosen
// candidate's own, and the planning time of every candidate in plan_ms.
TEST(PlanComparison, AutoRowIsTheChosenCandidatesPlanForEachBatch) {
  PlanConfig config;
  config.model = "tiny";
  config.ranks = 8;
  config.tokens_per_rank = 4096;
  config.batches = 2;
  config.planners = {"distca", "packed", "auto"};
  config.candidates = {"distca", "packed"};
  const PlanComparison out = compare_planners(config);
  ASSERT_EQ(out.planners.size(), 3U);
  const PlannerSummary& a = out.planners[2];
  EXPECT_TRUE(a.valid);
  // Only the meta-planner's row carries a choice report.
  EXPECT_FALSE(out.planners[0].auto_choice);
  ASSERT_TRUE(a.auto_choice);
  ASSERT_EQ(a.auto_choice->chosen.size(), 2U);
  // The first batch alone: auto's row is exactly its chosen candidate's.
  PlanConfig first = config;
  first.batches = 1;
  const PlanComparison one = compare_planners(first);
  first.planners = {one.planners[2].auto_choice->chosen[0]};
  first.candidates.clear();
  const PlannerSummary chosen = compare_planners(first).planners[0];
  EXPECT_EQ(one.planners[2].imbalance, chosen.imbalance);
  EXPECT_EQ(one.planners[2].comm_bytes_total, chosen.comm_bytes_total);
  EXPECT_EQ(one.planners[2].tasks, chosen.tasks);
  config.candidates = {"wlb"};
  EXPECT_THROW(compare_planners(config), Error);
  config.planners = {"distca"};
  config.candidates = {"packed"};
  EXPECT_THROW(compare_planners(config), Error);
}

}  // namespace
}  // namespace fulcrum::studies

#include "fulcrum/sim/auto_choice.hpp"

#include "fulcrum/core/error.hpp"
#include "fulcrum/workload/batch.hpp"
#include "fulcrum/workload/length_source.hpp"
#include "fulcrum/workload/model_config.hpp"

#include <gtest/gtest.h>

#include <algorithm>

namespace fulcrum::sim {
namespace {

LayerSetup one_gpu_ranks() { return gpu_per_rank(model_shape_preset("llama3-8b"), "h200-dgx", CommMode::kPingPong); }

PlannerOptions options() {
  PlannerOptions o;
  o.model = model_shape_preset("llama3-8b");
  return o;
}

// One layer of `name`'s own plan in steady state (the whole-layer schedule), forward + backward, in the
// mode auto gives it.
double layer_s(const std::string& name, const Batch& batch, const LayerSetup& setup) {
  const auto planner = make_planner(name, options());
  LayerSetup own = setup;
  if (!planner->capabilities().overlaps_traffic) own.mode = CommMode::kSingleStream;
  const Assignment a = plan_verified(*planner, batch);
  return simulate_pass(a, own, Pass::kForward).steady_makespan_s +
         simulate_pass(a, own, Pass::kBackward).steady_makespan_s;
}

TEST(AutoChoice, ChoosesTheCandidateWhosePlanSimulatesFastest) {
  auto lengths = make_length_source("pretrain", 5, 16384);
  BatchStream stream([&] { return lengths->next(); }, 16, 16384);
  const LayerSetup setup = one_gpu_ranks();
  const std::vector<std::string> names = {"distca", "packed", "perdoc-cp", "ring"};
  AutoChoice run;
  for (int b = 0; b < 3; ++b) {
    const Batch batch = stream.next();
    const BatchChoice choice = choose_plan(batch, names, options(), setup);
    std::vector<double> seconds;
    seconds.reserve(names.size());
    for (const auto& name : names) seconds.push_back(layer_s(name, batch, setup));
    const auto order = fastest_first(seconds);
    EXPECT_EQ(choice.chosen, names[order[0]]) << "batch " << b;
    EXPECT_EQ(choice.runner_up, names[order[1]]);
    EXPECT_DOUBLE_EQ(choice.chosen_s, seconds[order[0]]);
    EXPECT_DOUBLE_EQ(choice.runner_up_s, seconds[order[1]]);
    EXPECT_EQ(choice.assignment.tasks.size(), make_planner(choice.chosen, options())->plan(batch).tasks.size());
    EXPECT_TRUE(choice.refused.empty());
    run.record(choice);
  }
  ASSERT_EQ(run.chosen.size(), 3U);
  EXPECT_EQ(run.candidates, names);
  for (double r : run.runner_up_ratio) EXPECT_GE(r, 1.0);
}

TEST(AutoChoice, FastestFirstKeepsTheListedOrderOnTies) {
  EXPECT_EQ(fastest_first({2.0, 1.0, 1.0, 0.5}), (std::vector<std::size_t>{3, 1, 2, 0}));
}

TEST(AutoChoice, ACandidateThatRefusesTheBatchSitsItOutAndIsNamed) {
  // DCP refuses a batch with more computation blocks than it plans: 128-token blocks of 16 x 64K tokens.
  auto lengths = make_length_source("pretrain", 5, 65536);
  const Batch batch = BatchStream([&] { return lengths->next(); }, 16, 65536).next();
  PlannerOptions o = options();
  o.set("dcp-block", 128);
  const BatchChoice choice = choose_plan(batch, {"dcp", "packed"}, o, one_gpu_ranks());
  EXPECT_EQ(choice.chosen, "packed");
  EXPECT_TRUE(choice.runner_up.empty());
  ASSERT_EQ(choice.refused.size(), 1U);
  EXPECT_EQ(choice.refused[0].rfind("dcp: dcp-block = 128", 0), 0U) << choice.refused[0];
  EXPECT_EQ(choice.planning_s[0], 0);
  // When every candidate refuses, the error names each reason.
  try {
    (void)choose_plan(batch, {"dcp"}, o, one_gpu_ranks());
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kBadInput);
    EXPECT_NE(std::string(e.what()).find("auto: no candidate plans this batch (dcp: dcp-block"), std::string::npos);
  }
}

TEST(AutoChoice, BadCandidatesNameTheField) {
  const auto expect_error = [](const std::vector<std::string>& candidates, AutoScope scope,
                               const std::string& message) {
    try {
      check_auto_candidates(candidates, scope);
      ADD_FAILURE() << "no error for " << message;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
    }
  };
  for (const AutoScope scope : {AutoScope::kBatch, AutoScope::kRun}) {
    expect_error({"striped"}, scope, "candidates: striped does not compute exactly the batch");
    expect_error({"distca", "distca"}, scope, "candidates: distca is given twice");
    expect_error({"nope"}, scope, "candidates: 'nope' is not a planner");
    EXPECT_NO_THROW(check_auto_candidates(default_auto_candidates(scope), scope));
    const auto defaults = default_auto_candidates(scope);
    EXPECT_EQ(std::count(defaults.begin(), defaults.end(), "distca"), 1);
  }
  // A deferring planner: per batch nothing keeps its queue; a simulated run does.
  expect_error({"wlb"}, AutoScope::kBatch, "candidates: wlb defers documents to later batches");
  EXPECT_NO_THROW(check_auto_candidates({"wlb", "distca"}, AutoScope::kRun));
  const auto per_batch = default_auto_candidates(AutoScope::kBatch);
  const auto per_run = default_auto_candidates(AutoScope::kRun);
  EXPECT_EQ(std::count(per_batch.begin(), per_batch.end(), "wlb"), 0);
  EXPECT_EQ(std::count(per_run.begin(), per_run.end(), "wlb"), 1);
  EXPECT_EQ(per_run.size(), per_batch.size() + 1);
}

}  // namespace
}  // namespace fulcrum::sim

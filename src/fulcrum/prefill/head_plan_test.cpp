// Head plans: every solver's assignment fits the model and ranks, the prediction is the cost model's price
// of that assignment, and every solver's plan prefills (thread ranks) to the fp64 reference within 1e-5 (the
// tolerance of tp_prefill_test.cpp: the rank code is fp32, a wrong head or slot moves the result by O(0.1)).
#include "fulcrum/prefill/head_plan.hpp"

#include "fulcrum/core/error.hpp"
#include "fulcrum/planners/heads/scenarios.hpp"
#include "fulcrum/planners/heads/solver.hpp"
#include "fulcrum/prefill/gemm.hpp"
#include "fulcrum/prefill/reference.hpp"
#include "fulcrum/prefill/test_model.hpp"
#include "fulcrum/prefill/tp_prefill.hpp"
#include "fulcrum/runtime/local_communicator.hpp"

#include <gtest/gtest.h>

#include <mutex>

namespace fulcrum::prefill {
namespace {

using testing::TempWeights;
using testing::test_model;

constexpr Tokens kTokens = 80;

std::vector<heads::LayerCosts> mixed_costs(const ModelShape& shape) {
  const auto report = heads::builtin_head_patterns("mixed", shape, kTokens);
  return heads::model_layer_costs(report, shape, kTokens, head_cost_model(shape, std::nullopt));
}

TEST(HeadPlan, EverySolverGivesAValidAssignmentPricedByTheCostModel) {
  const ModelShape shape = test_model();  // 8 q heads in 2 KV groups, 2 layers
  const auto costs = mixed_costs(shape);
  ASSERT_EQ(costs.size(), 2U);
  for (int ranks : {2, 3, 4}) {
    for (const auto& name : heads::head_solver_names()) {
      SCOPED_TRACE(fmt::format("{} on {} ranks", name, ranks));
      const heads::ModelPlan plan = heads::solve_model(name, costs, ranks, 7);
      EXPECT_EQ(plan.solver, name);
      EXPECT_NO_THROW(validate_assignment(plan.assignment, shape, ranks, "assignment"));
      ASSERT_EQ(plan.predicted.size(), 2U);
      double total = 0;
      for (std::size_t l = 0; l < 2; ++l) {
        const double want = heads::layer_time(costs[l], plan.assignment[l], ranks);
        EXPECT_DOUBLE_EQ(plan.predicted[l].layer_s(), want);
        EXPECT_GE(want, plan.lower_bound_s[l] * (1 - 1e-12));
        total += want;
      }
      EXPECT_DOUBLE_EQ(plan.predicted_total_s(), total);
      EXPECT_EQ(heads::solve_model(name, costs, ranks, 7).assignment, plan.assignment) << "seeded";
    }
  }
  // Megatron's blocks are the prefill's contiguous assignment.
  EXPECT_EQ(heads::solve_model("uniform", costs, 4, 1).assignment, contiguous_assignment(shape, 4));
  const heads::ModelPlan fixed = heads::price_model("file", contiguous_assignment(shape, 2), costs, 2);
  EXPECT_DOUBLE_EQ(fixed.predicted[1].layer_s(), heads::layer_time(costs[1], fixed.assignment[1], 2));
}

TEST(HeadPlan, AnalyticCostsUseTheModelsShape) {
  const ModelShape shape = test_model();
  const auto model = head_cost_model(shape, std::nullopt);
  EXPECT_EQ(model.analytic.head_dim, 16);
  EXPECT_EQ(model.analytic.hidden, 64);
  const auto costs = mixed_costs(shape);
  // Layer 0: head 0 full, head 1 a-shape (kind (h + l) mod 4): the full head costs more.
  EXPECT_GT(costs[0].attention_s[0], costs[0].attention_s[1]);
  EXPECT_EQ(costs[0].group_size, 4);
}

TEST(HeadPlan, BadInputNamesTheField) {
  const ModelShape shape = test_model();
  const auto costs = mixed_costs(shape);
  auto message = [&](auto&& f) {
    try {
      f();
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kBadInput);
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(message([&] { heads::solve_model("magic", costs, 2, 1); }).find("solver = 'magic'"), std::string::npos);
  EXPECT_NE(message([&] { heads::solve_model("lpt-ls", costs, 9, 1); }).find("devices = 9"), std::string::npos);
  auto report = heads::builtin_head_patterns("mixed", shape, kTokens);
  report.layers.pop_back();
  EXPECT_NE(message([&] {
              heads::model_layer_costs(report, shape, kTokens, head_cost_model(shape, std::nullopt));
            }).find("patterns.layers = 1 layers"),
            std::string::npos);
}

TEST(HeadPlan, EverySolversPlanPrefillsToTheReference) {
  const ModelShape shape = test_model();
  const TempWeights weights(shape, 3, "head-plan");
  const auto report = heads::builtin_head_patterns("mixed", shape, kTokens);
  PrefillSpec spec;
  spec.shape = shape;
  spec.tokens = kTokens;
  spec.seed = 4;
  spec.head_masks = heads::report_masks(report, shape.layers, kTokens, spec.seed);
  const auto costs = heads::model_layer_costs(report, shape, kTokens, head_cost_model(shape, std::nullopt));
  spec.assignment = contiguous_assignment(shape, 1);
  const auto want = reference_prefill(spec, weights.path());
  set_blas_threads(1);
  for (int ranks : {2, 3}) {
    for (const auto& name : heads::head_solver_names()) {
      SCOPED_TRACE(fmt::format("{} on {} ranks", name, ranks));
      spec.assignment = heads::solve_model(name, costs, ranks, 2).assignment;
      std::vector<float> got;
      std::mutex mutex;
      runtime::run_local_ranks(ranks, [&](runtime::Communicator& comm) {
        PrefillOptions options;
        options.weights_path = weights.path();
        options.threads = 1;
        auto mine = run_prefill_rank(spec, options, comm);
        const std::lock_guard lock(mutex);
        if (comm.rank() == 0) got = std::move(mine.hidden);
      });
      EXPECT_LE(max_relative_error(got, want), 1e-5);
    }
  }
}

}  // namespace
}  // namespace fulcrum::prefill

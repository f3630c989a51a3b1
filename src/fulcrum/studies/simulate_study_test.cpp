#include "fulcrum/studies/simulate_study.hpp"

#include "fulcrum/core/error.hpp"
#include "fulcrum/sim/training_test_cases.hpp"

#include <gtest/gtest.h>

namespace fulcrum::studies {
namespace {

using sim::TrainingConfig;
using sim::testing::h200;
using sim::testing::small_config;
using sim::testing::tiny;

TEST(Study, SweepsEveryPointAndPlannerAgainstTheReference) {
  StudySpec spec;
  spec.base = small_config("distca");
  spec.base.iterations = 1;
  spec.model = "tiny";
  spec.planners = {"distca", "packed"};
  spec.modes = {CommMode::kPingPong, CommMode::kSingleStream};
  spec.sweep = {parse_sweep_axis("max-doc-len=2048,8192")};
  int calls = 0;
  const Study study = run_study(spec, [&](int done, int total) {
    ++calls;
    EXPECT_EQ(total, 6);
    EXPECT_EQ(done, calls);
  });
  ASSERT_EQ(study.rows.size(), 6u);
  EXPECT_EQ(study.reference, "distca");
  EXPECT_EQ(study.rows[0].point, (std::vector<std::pair<std::string, std::string>>{{"max-doc-len", "2048"}}));
  EXPECT_EQ(study.rows[3].result.config.max_doc_len, 8192);
  EXPECT_EQ(study.rows[0].speedup, 1.0);
  EXPECT_EQ(study.rows[1].result.config.mode, CommMode::kSingleStream);
  EXPECT_THROW(parse_sweep_axis("colour=red"), Error);
  EXPECT_THROW(parse_sweep_axis("gpus="), Error);
  spec.sweep = {parse_sweep_axis("gpus=16,x")};
  EXPECT_THROW(run_study(spec), Error);
}

// Planner options are sweep keys: DCP's head blocks, whose allowed values depend on the model, simulate
// at 1 and 2 (the tiny model's 2 GQA groups) and fail as bad input, naming the option, at 4.
TEST(Study, DcpHeadBlocksAreASweepKeyCheckedAgainstTheModel) {
  StudySpec spec;
  spec.base = small_config("dcp");
  spec.base.iterations = 1;
  spec.model = "tiny";
  spec.planners = {"dcp"};
  spec.sweep = {parse_sweep_axis("dcp-head-blocks=1,2")};
  const Study study = run_study(spec);
  ASSERT_EQ(study.rows.size(), 2u);
  EXPECT_EQ(study.rows[1].point, (std::vector<std::pair<std::string, std::string>>{{"dcp-head-blocks", "2"}}));
  EXPECT_EQ(study.rows[1].result.config.planner_options.get(find_planner_option("dcp-head-blocks")), 2);
  EXPECT_GT(study.rows[1].result.tokens_per_s, 0);
  spec.sweep = {parse_sweep_axis("dcp-head-blocks=4")};
  try {
    run_study(spec);
    ADD_FAILURE() << "4 head blocks of 2 kv heads simulated";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kBadInput);
    EXPECT_NE(std::string(e.what()).find("dcp-head-blocks = 4"), std::string::npos) << e.what();
  }
}

// The search keeps the global batch and picks the layout with the best throughput among those that fit.
TEST(Study, SearchKeepsTheGlobalBatchAndFindsNoWorseThanTheGivenLayout) {
  TrainingConfig c = small_config("wlb");
  c.iterations = 1;
  const auto given = sim::simulate_training(c, tiny(), h200());
  const auto best = search_best(c, tiny(), h200());
  EXPECT_GE(best.tokens_per_s, given.tokens_per_s * (1 - 1e-12));
  const auto& p = best.config.parallel;
  EXPECT_EQ(static_cast<double>(best.config.rank_tokens()) * p.dp() * p.microbatch_count(),
            static_cast<double>(c.rank_tokens()) * c.parallel.dp() * c.parallel.microbatch_count());
}

}  // namespace
}  // namespace fulcrum::studies

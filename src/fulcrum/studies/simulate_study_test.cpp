#include "fulcrum/studies/simulate_study.hpp"

#include "fulcrum/core/error.hpp"
#include "fulcrum/sim/training_test_cases.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>

namespace fulcrum::studies {
namespace {

using sim::TrainingConfig;
using sim::testing::h200;
using sim::testing::small_config;
using sim::testing::tiny;

// One iteration of distca and packed on the tiny model, swept over `axis`.
StudySpec distca_and_packed(const std::string& axis) {
  StudySpec spec;
  spec.base = small_config("distca");
  spec.base.iterations = 1;
  spec.model = "tiny";
  spec.planners = {"distca", "packed"};
  spec.sweep = {parse_sweep_axis(axis)};
  return spec;
}

TEST(Study, SweepsEveryPointAndPlannerAgainstTheReference) {
  StudySpec spec = distca_and_packed("max-doc-len=2048,8192");
  spec.modes = {CommMode::kPingPong, CommMode::kSingleStream};
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
  // A CP degree the search considers: one that keeps the documents whole (cp 1 cuts them, computing less).
  c.parallel.cp = 0;
  c.parallel.cp = sim::cp_degree_for(c, tiny(), h200());
  ASSERT_TRUE(sim::keeps_documents_whole(c, tiny(), h200(), c.parallel.cp));
  const auto given = sim::simulate_training(c, tiny(), h200());
  const auto best = search_best(c, tiny(), h200());
  EXPECT_GE(best.tokens_per_s, given.tokens_per_s * (1 - 1e-12));
  const auto& p = best.config.parallel;
  EXPECT_EQ(static_cast<double>(best.config.rank_tokens()) * p.dp() * p.microbatch_count(),
            static_cast<double>(c.rank_tokens()) * c.parallel.dp() * c.parallel.microbatch_count());
}

// --search chooses only a layout that fits: the fastest choice, made to not fit, gives way to one that does;
// where nothing fits, the least memory is reported, out of memory.
TEST(Study, SearchChoosesOnlyLayoutsThatFitInMemory) {
  TrainingConfig c = small_config("perdoc-cp");  // fastest at pp 1, which needs about twice the memory of pp 2
  c.iterations = 1;
  HardwareModel gpu = h200();
  const auto fastest = search_best(c, tiny(), gpu);
  ASSERT_FALSE(fastest.memory.out_of_memory());
  gpu.memory_bytes = fastest.memory.total_bytes() * (1 - 1e-9);
  const auto fitting = search_best(c, tiny(), gpu);
  EXPECT_FALSE(fitting.memory.out_of_memory()) << fitting.memory.total_bytes() << " > " << gpu.memory_bytes;
  EXPECT_NE(fitting.config.parallel.to_string(), fastest.config.parallel.to_string());
  gpu.memory_bytes = 1;
  const auto least = search_best(c, tiny(), gpu);
  EXPECT_TRUE(least.memory.out_of_memory());
  EXPECT_LE(least.memory.total_bytes(), fitting.memory.total_bytes());
}

// A point whose reference does not fit has no speedups; a row that does not fit has none either.
TEST(Study, OutOfMemoryRowsAndPointsHaveNoSpeedup) {
  StudySpec spec = distca_and_packed("recompute=none,full");
  Study fits = run_study(spec);
  ASSERT_EQ(fits.rows.size(), 4u);
  for (const auto& row : fits.rows) EXPECT_TRUE(row.speedup.has_value());
  // Between the two: none's activations do not fit, full's do.
  const double none = fits.rows[0].result.memory.total_bytes(), full = fits.rows[2].result.memory.total_bytes();
  ASSERT_LT(full, none);
  HardwareModel gpu = h200();
  gpu.memory_bytes = (none + full) / 2;
  const std::string path = ::testing::TempDir() + "study_memory_hardware.json";
  std::ofstream(path) << gpu.to_json().dump();
  spec.hardware = path;
  const Study study = run_study(spec);
  EXPECT_EQ(study.rows[0].no_speedup_reason(), "OOM");  // distca, recompute none: the reference
  EXPECT_FALSE(study.rows[1].speedup.has_value());
  EXPECT_TRUE(study.rows[2].speedup.has_value());
  EXPECT_TRUE(study.rows[3].speedup.has_value());
}

}  // namespace
}  // namespace fulcrum::studies

#include "fulcrum/sim/pipeline.hpp"

#include "fulcrum/core/error.hpp"

#include <gtest/gtest.h>

namespace fulcrum::sim {
namespace {

std::vector<std::vector<StageWork>> uniform(int stages, int microbatches, double f, double b) {
  return std::vector<std::vector<StageWork>>(stages, std::vector<StageWork>(microbatches, StageWork{f, b}));
}

// With equal steps, 1F1B takes (M + S - 1)(f + b) and every stage idles (S - 1)(f + b): the textbook
// bubble, (S - 1) / (M + S - 1) of the iteration.
TEST(Pipeline, OneFOneBBubbleMatchesTheFormula) {
  for (int stages : {1, 2, 4, 8}) {
    for (int microbatches : {1, 2, 4, 8, 16}) {
      for (auto [f, b] : {std::pair{1.0, 2.0}, std::pair{1.0, 1.0}, std::pair{0.5, 1.5}}) {
        const auto r = simulate_1f1b(uniform(stages, microbatches, f, b));
        EXPECT_NEAR(r.iteration_s, (microbatches + stages - 1) * (f + b), 1e-9)
            << stages << " stages, " << microbatches << " micro-batches";
        for (double idle : r.idle_s) EXPECT_NEAR(idle, (stages - 1) * (f + b), 1e-9);
        EXPECT_EQ(r.steps.size(), static_cast<std::size_t>(2 * stages * microbatches));
      }
    }
  }
}

// One long document on stage 2: its 6 extra seconds stretch the iteration (steps are a max-plus system, so
// by more than nothing and at most 6 s) and every other stage waits for it as bubble.
TEST(Pipeline, AStragglerMicroBatchStretchesTheIteration) {
  auto work = uniform(4, 8, 1.0, 2.0);
  const auto base = simulate_1f1b(work);
  work[2][5] = {3.0, 6.0};
  const auto r = simulate_1f1b(work);
  EXPECT_GT(r.iteration_s, base.iteration_s);
  EXPECT_LE(r.iteration_s, base.iteration_s + 6.0 + 1e-9);
  EXPECT_NEAR(r.busy_s[2], base.busy_s[2] + 6.0, 1e-9);
  for (int s : {0, 1, 3}) EXPECT_GT(r.idle_s[s], base.idle_s[s]) << "stage " << s;
}

TEST(Pipeline, PointToPointTimeAddsPerHop) {
  const auto r = simulate_1f1b(uniform(3, 1, 1.0, 1.0), 0.25);
  EXPECT_NEAR(r.iteration_s, 6.0 + 4 * 0.25, 1e-9) << "F0 F1 F2 B2 B1 B0 with 4 hops between them";
}

TEST(Pipeline, BadInputIsNamed) {
  EXPECT_THROW(simulate_1f1b({}), Error);
  EXPECT_THROW(simulate_1f1b({{StageWork{}}, {}}), Error);
  EXPECT_THROW(simulate_1f1b(uniform(2, 2, 1, 1), -1), Error);
}

}  // namespace
}  // namespace fulcrum::sim

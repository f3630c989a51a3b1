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

// Two stages, two micro-batches, worked by hand: F0 | F1 F0 | - B0 | - F1 | B0 B1 | B1 -.
TEST(PhaseAligned, TwoStagesByHand) {
  const auto ticks = phase_aligned_ticks(2, 2);
  const std::vector<std::pair<bool, std::vector<int>>> expected = {{false, {0, -1}}, {false, {1, 0}}, {true, {-1, 0}},
                                                                   {false, {-1, 1}}, {true, {0, 1}},  {true, {1, -1}}};
  ASSERT_EQ(ticks.size(), expected.size());
  for (std::size_t t = 0; t < ticks.size(); ++t) {
    EXPECT_EQ(ticks[t].backward, expected[t].first) << "tick " << t;
    EXPECT_EQ(ticks[t].microbatch, expected[t].second) << "tick " << t;
  }
}

// Every stage runs every micro-batch forward then backward exactly once, in dependency order, never
// holding more than in_flight_limit in flight; the schedule takes 2 (M + S - 1) ticks, as 1F1B takes steps.
TEST(PhaseAligned, RunsEveryStepOnceInDependencyOrder) {
  for (int stages = 1; stages <= 6; ++stages) {
    for (int microbatches = 1; microbatches <= 12; ++microbatches) {
      const auto ticks = phase_aligned_ticks(stages, microbatches);
      std::vector<std::vector<int>> fwd(stages, std::vector<int>(microbatches, -1)), bwd = fwd;
      for (int t = 0; t < static_cast<int>(ticks.size()); ++t) {
        for (int s = 0; s < stages; ++s) {
          const int m = ticks[t].microbatch[s];
          if (m < 0) continue;
          auto& when = (ticks[t].backward ? bwd : fwd)[s][m];
          ASSERT_EQ(when, -1) << "stage " << s << " micro-batch " << m << " ran twice";
          when = t;
        }
        for (int s = 0; s < stages; ++s) {
          int in_flight = 0;
          for (int m = 0; m < microbatches; ++m) in_flight += fwd[s][m] >= 0 && bwd[s][m] < 0;
          ASSERT_LE(in_flight, in_flight_limit(stages, s));
        }
      }
      for (int s = 0; s < stages; ++s) {
        for (int m = 0; m < microbatches; ++m) {
          ASSERT_GE(fwd[s][m], 0);
          ASSERT_GT(bwd[s][m], fwd[s][m]);
          if (s > 0) {
            ASSERT_GT(fwd[s][m], fwd[s - 1][m]);
          }
          if (s + 1 < stages) {
            ASSERT_GT(bwd[s][m], bwd[s + 1][m]);
          }
        }
      }
      EXPECT_EQ(static_cast<int>(ticks.size()), 2 * (microbatches + stages - 1)) << stages << "x" << microbatches;
    }
  }
  EXPECT_THROW(phase_aligned_ticks(0, 1), Error);
  EXPECT_THROW(phase_aligned_ticks(2, 0), Error);
}

}  // namespace
}  // namespace fulcrum::sim

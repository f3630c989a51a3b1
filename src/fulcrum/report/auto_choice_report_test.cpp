#include "fulcrum/report/auto_choice_report.hpp"

#include <gtest/gtest.h>

namespace fulcrum {
namespace {

TEST(AutoChoiceReport, CountsChoicesRunnersUpAndPlanningAndNamesRefusals) {
  sim::AutoChoice a;
  a.candidates = {"distca", "dcp", "packed"};
  a.chosen = {"distca", "packed", "distca", "distca"};
  a.runner_up = {"packed", "distca", "", "packed"};
  a.runner_up_ratio = {1.2, 1.1, 0, 1.3};
  a.refused = {"dcp: dcp-block = 8: too many blocks"};
  a.planning_s = {0.5, 0, 0.25};
  a.chosen_planning_s = 0.5;
  a.simulating_s = 2;
  const auto lines = auto_choice_lines("auto at base", a);
  ASSERT_EQ(lines.size(), 2U);
  // Candidates in their listed order, counts over the batches; the median ratio leaves out the batch that
  // had no runner-up.
  EXPECT_EQ(lines[0],
            "auto at base: chose distca 3/4, packed 1/4; runner-up distca 1/4, packed 2/4, median 1.200x the chosen "
            "time; planning 0.75 s for every candidate (distca 0.5, dcp 0, packed 0.25) against 0.5 s for the chosen "
            "plans, simulating them 2 s");
  EXPECT_EQ(lines[1], "  sat out a batch: dcp: dcp-block = 8: too many blocks");
}

}  // namespace
}  // namespace fulcrum

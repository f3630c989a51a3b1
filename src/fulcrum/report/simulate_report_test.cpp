#include "fulcrum/report/simulate_report.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <tuple>

namespace fulcrum {
namespace {

// A study of two points x (distca in two modes, wlb), with made-up results: the outputs must carry every
// row, label DistCA by mode, and place each speedup at its point and system.
studies::Study two_point_study() {
  studies::Study study;
  study.reference = "wlb";
  for (const std::string gpus : {"64", "128"}) {
    for (auto [system, mode, speedup] :
         {std::tuple{"distca", CommMode::kPingPong, 1.25}, std::tuple{"distca", CommMode::kSignal, 1.5},
          std::tuple{"wlb", CommMode::kSingleStream, 1.0}}) {
      studies::StudyRow row;
      row.point = {{"gpus", gpus}};
      row.result.config.system = system;
      row.result.config.mode = mode;
      row.result.mean_iteration_s = 2.0;
      row.result.breakdown = {1.0, 0.5, 0.25, 0.2, 0.05};
      row.speedup = gpus == "64" ? speedup : 2 * speedup;
      study.rows.push_back(row);
    }
  }
  return study;
}

TEST(SimulateReport, EveryOutputCarriesEveryRow) {
  const auto study = two_point_study();
  const std::string table = study_table(study);
  EXPECT_NE(table.find("distca/signal"), std::string::npos);
  EXPECT_NE(table.find("gpus=128"), std::string::npos);
  const std::string csv = study_csv(study);
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 7);  // header + 6 rows
  const auto json = study_json(study);
  EXPECT_EQ(json["reference"], "wlb");
  ASSERT_EQ(json["rows"].size(), 6u);
  EXPECT_EQ(json["rows"][1]["mode"], "signal");
  EXPECT_EQ(json["rows"][4]["point"], "gpus=128");
}

TEST(SimulateReport, ChartsPlaceEachValueAtItsPointAndSeries) {
  const auto study = two_point_study();
  const BarChart speedup = study_speedup_chart(study);
  ASSERT_EQ(speedup.categories, (std::vector<std::string>{"gpus=64", "gpus=128"}));
  ASSERT_EQ(speedup.series.size(), 3u);
  EXPECT_EQ(speedup.series[1].name, "distca/signal");
  EXPECT_EQ(speedup.series[1].values, (std::vector<double>{1.5, 3.0}));
  EXPECT_EQ(speedup.series[2].values, (std::vector<double>{1.0, 2.0}));
  EXPECT_NO_THROW(speedup.validate());
  const BarChart parts = study_breakdown_chart(study);
  ASSERT_EQ(parts.series.size(), 5u);
  EXPECT_EQ(parts.categories.size(), 6u);
  EXPECT_EQ(parts.series[2].name, "exposed comm");
  EXPECT_EQ(parts.series[2].values.front(), 0.25);
  EXPECT_NO_THROW(parts.validate());
}

}  // namespace
}  // namespace fulcrum

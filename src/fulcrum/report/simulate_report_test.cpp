#include "fulcrum/report/simulate_report.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <tuple>

namespace fulcrum {
namespace {

// A study of two points x (distca in two modes, wlb), with made-up results: the outputs must carry every
// row, label DistCA by mode, and place each speedup at its point and planner.
studies::Study two_point_study() {
  studies::Study study;
  study.reference = "wlb";
  for (const std::string gpus : {"64", "128"}) {
    for (auto [planner, mode, speedup] :
         {std::tuple{"distca", CommMode::kPingPong, 1.25}, std::tuple{"distca", CommMode::kSignal, 1.5},
          std::tuple{"wlb", CommMode::kSingleStream, 1.0}}) {
      studies::StudyRow row;
      row.point = {{"gpus", gpus}};
      row.result.config.planner = planner;
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

TEST(SimulateReport, ChartsPlaceEachValueAtItsPointAndPlanner) {
  const auto study = two_point_study();
  const BarChart speedup = study_speedup_chart(study);
  EXPECT_EQ(speedup.bar_names, (std::vector<std::string>{"distca/pingpong", "distca/signal", "wlb"}));
  EXPECT_FALSE(speedup.stacked());
  ASSERT_EQ(speedup.panels.size(), 1u);
  ASSERT_EQ(speedup.panels[0].groups.size(), 2u);
  EXPECT_EQ(speedup.panels[0].groups[1].label, "gpus=128");
  EXPECT_EQ(speedup.panels[0].groups[0].bars[1], (std::vector<double>{1.5}));
  EXPECT_EQ(speedup.panels[0].groups[1].bars[1], (std::vector<double>{3.0}));
  EXPECT_EQ(speedup.panels[0].groups[1].bars[2], (std::vector<double>{2.0}));
  EXPECT_NO_THROW(speedup.validate());
  // The breakdown: a stacked bar per planner and point, its parts summing to the iteration.
  const BarChart parts = study_breakdown_chart(study);
  EXPECT_TRUE(parts.stacked());
  EXPECT_EQ(parts.bar_names, speedup.bar_names);
  ASSERT_EQ(parts.segment_names.size(), 5u);
  EXPECT_EQ(parts.segment_names[2], "exposed comm");
  EXPECT_EQ(parts.y_label, "time per iteration (s)");
  for (const auto& group : parts.panels.at(0).groups) {
    for (const auto& bar : group.bars) EXPECT_EQ(bar, (std::vector<double>{1.0, 0.5, 0.25, 0.2, 0.05}));
  }
  EXPECT_NO_THROW(parts.validate());
}

// A row that does not fit in memory has no speedup, and neither has any row at a point where the reference
// does not fit: the table says which, the CSV leaves the field empty, the JSON has null, and the charts name
// the planners out of memory under the point (a zero speedup bar).
TEST(SimulateReport, OutOfMemoryRowsHaveNoSpeedupAndEveryOutputMarksThem) {
  auto study = two_point_study();
  for (auto& row : study.rows) {
    row.result.memory.capacity_bytes = 1e9;
    row.result.memory.weights_bytes = 5e8;
  }
  study.rows[1].result.memory.weights_bytes = 2e9;  // distca/signal at gpus=64
  study.rows[1].speedup.reset();
  study.rows[5].result.memory.weights_bytes = 2e9;  // wlb, the reference, at gpus=128
  for (std::size_t r = 3; r < 6; ++r) study.rows[r].speedup.reset();
  EXPECT_EQ(study.rows[1].no_speedup_reason(), "OOM");
  EXPECT_EQ(study.rows[3].no_speedup_reason(), "ref OOM");
  EXPECT_EQ(study.rows[0].no_speedup_reason(), "");

  const std::string table = study_table(study);
  EXPECT_NE(table.find(" OOM "), std::string::npos) << table;
  EXPECT_NE(table.find(" ref OOM "), std::string::npos) << table;
  // The speedup column (the 12th) of distca/signal at gpus=64 is empty, of distca/pingpong there 1.25.
  const auto csv_speedup = [csv = study_csv(study)](const std::string& row_start) {
    const std::size_t at = csv.find(row_start);
    if (at == std::string::npos) return std::string("no row");
    std::string field;
    for (std::size_t i = at, commas = 0; i < csv.size() && csv[i] != '\n' && commas <= 11; ++i) {
      if (csv[i] == ',') {
        ++commas;
      } else if (commas == 11) {
        field += csv[i];
      }
    }
    return field;
  };
  EXPECT_EQ(csv_speedup("\"gpus=64\",distca,signal,"), "");
  EXPECT_EQ(csv_speedup("\"gpus=64\",distca,pingpong,"), "1.25");
  const auto json = study_json(study);
  EXPECT_TRUE(json["rows"][1]["speedup"].is_null());
  EXPECT_TRUE(json["rows"][3]["speedup"].is_null());
  EXPECT_EQ(json["rows"][0]["speedup"], 1.25);

  const BarChart speedup = study_speedup_chart(study);
  EXPECT_EQ(speedup.panels[0].groups[0].label, "gpus=64 (OOM: distca/signal)");
  EXPECT_EQ(speedup.panels[0].groups[1].label, "gpus=128 (OOM: wlb)");
  EXPECT_EQ(speedup.panels[0].groups[0].bars[1], (std::vector<double>{0.0}));
  EXPECT_EQ(speedup.panels[0].groups[1].bars[0], (std::vector<double>{0.0}));
  EXPECT_EQ(study_breakdown_chart(study).panels[0].groups[1].label, "gpus=128 (OOM: wlb)");
}

TEST(SimulateReport, ManyPointsOfSeveralKeysBecomeOnePanelPerFirstKeyValue) {
  studies::Study study;
  study.reference = "wlb";
  for (const std::string gpus : {"64", "128", "256"}) {
    for (const std::string len : {"131072", "262144", "524288"}) {
      for (const std::string dataset : {"pretrain", "prolong"}) {
        for (const char* planner : {"distca", "wlb"}) {
          studies::StudyRow row;
          row.point = {{"gpus", gpus}, {"max-doc-len", len}, {"dataset", dataset}};
          row.result.config.planner = planner;
          row.result.config.mode = CommMode::kPingPong;
          row.speedup = std::stod(gpus) + std::stod(len) / 1e6;
          study.rows.push_back(row);
        }
      }
    }
  }
  const BarChart chart = study_speedup_chart(study);
  ASSERT_EQ(chart.panels.size(), 3u);
  EXPECT_EQ(chart.panels[1].title, "gpus=128");
  ASSERT_EQ(chart.panels[1].groups.size(), 6u);
  EXPECT_EQ(chart.panels[1].groups[3].label, "max-doc-len=262144 dataset=prolong");
  EXPECT_EQ(chart.panels[1].groups[3].bars[0], (std::vector<double>{128 + 0.262144}));
  // A study of few points stays one panel, its groups labelled by every key.
  study.rows.resize(8);
  const BarChart few = study_speedup_chart(study);
  ASSERT_EQ(few.panels.size(), 1u);
  EXPECT_EQ(few.panels[0].groups[0].label, "gpus=64 max-doc-len=131072 dataset=pretrain");
}

}  // namespace
}  // namespace fulcrum

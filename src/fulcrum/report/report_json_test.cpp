#include "fulcrum/report/report_json.hpp"

#include "fulcrum/planners/planner.hpp"

#include <gtest/gtest.h>

namespace fulcrum {
namespace {

TEST(ReportJson, PlannerOptionsAreSnakeCaseWithWholeOptionsAsIntegers) {
  PlannerOptions options;
  options.set("dcp-block", 512).set("tolerance", 0.05);
  const nlohmann::json json = planner_options_json(options);
  const auto specs = planner_option_specs();
  ASSERT_EQ(json.size(), specs.size());  // every registered option, set or not
  for (const auto& spec : specs) {
    std::string key(spec.name);
    for (char& c : key) c = c == '-' ? '_' : c;
    ASSERT_TRUE(json.contains(key)) << key;
    EXPECT_EQ(json[key].is_number_integer(), spec.integer) << key;
    EXPECT_EQ(json[key].get<double>(), options.get(spec)) << key;
  }
  EXPECT_EQ(json["dcp_block"].dump(), "512");
  EXPECT_EQ(json["tolerance"].get<double>(), 0.05);
}

TEST(ReportJson, ReportsStartVersionedAndCountsAreIntegers) {
  EXPECT_EQ(report_object(), nlohmann::json({{"schema_version", kReportSchemaVersion}}));
  EXPECT_EQ(nlohmann::json(whole(3.0e12)).dump(), "3000000000000");  // bytes summed in a double
  EXPECT_EQ(whole(7.0000000001), 7);
}

}  // namespace
}  // namespace fulcrum

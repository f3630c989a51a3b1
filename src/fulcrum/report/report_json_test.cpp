#include "fulcrum/report/report_json.hpp"

#include <gtest/gtest.h>

namespace fulcrum {
namespace {

TEST(ReportJson, ReportsStartVersionedAndCountsAreIntegers) {
  EXPECT_EQ(report_object(), nlohmann::json({{"schema_version", kReportSchemaVersion}}));
  EXPECT_EQ(nlohmann::json(whole(3.0e12)).dump(), "3000000000000");  // bytes summed in a double
  EXPECT_EQ(whole(7.0000000001), 7);
}

}  // namespace
}  // namespace fulcrum

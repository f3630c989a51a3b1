#include "fulcrum/cost/profile_table.hpp"

#include "fulcrum/core/error.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace fulcrum {
namespace {

ProfileTable two_by_two() {
  // Throughput 1, 2 at q = 100 and 3, 4 at q = 300 (keys 100 and 300), backward half of forward.
  nlohmann::json j = {
      {"forward", {{"query_lengths", {100, 300}}, {"key_lengths", {100, 300}}, {"flops_per_s", {1, 2, 3, 4}}}},
      {"backward", {{"query_lengths", {100, 300}}, {"key_lengths", {100, 300}}, {"flops_per_s", {.5, 1, 1.5, 2}}}}};
  return ProfileTable::from_json(j);
}

TEST(ProfileTable, InterpolatesBilinearlyInsideTheGrid) {
  const auto table = two_by_two();
  EXPECT_DOUBLE_EQ(table.forward_s(100, 100, 10), 10.0);
  EXPECT_DOUBLE_EQ(table.forward_s(200, 200, 10), 10.0 / 2.5);  // centre: mean of 1, 2, 3, 4
  EXPECT_DOUBLE_EQ(table.forward_s(300, 200, 7), 7.0 / 3.5);
  EXPECT_DOUBLE_EQ(table.backward_s(200, 200, 10), 10.0 / 1.25);
}

// Past the grid the rate saturates; below it a shard takes as long as the smallest measured one, whatever its
// work: a 10 x 50 shard of 10 x 50 x c FLOPs takes what the 100 x 100 shard of 100 x 100 x c takes.
TEST(ProfileTable, SaturatesPastTheGridAndCostsTheSmallestShapeBelow) {
  const auto table = two_by_two();
  EXPECT_DOUBLE_EQ(table.forward_s(100000, 100000, 8), 2.0);  // the top corner's throughput, 4
  EXPECT_DOUBLE_EQ(table.forward_s(10, 50, 10.0 * 50 * 8), table.forward_s(100, 100, 100.0 * 100 * 8));
  EXPECT_DOUBLE_EQ(table.forward_s(10, 300, 8), 8.0 / (0.1 * 2));  // q below (the q = 100 row), keys on the grid
  EXPECT_DOUBLE_EQ(table.backward_s(50, 100, 8), 8.0 / (0.5 * 0.5));
}

TEST(ProfileTable, JsonRoundTripsAndBadTablesAreRejected) {
  const auto table = two_by_two();
  EXPECT_EQ(ProfileTable::from_json(table.to_json()).to_json(), table.to_json());
  auto bad = table.to_json();
  bad["forward"]["flops_per_s"] = {1, 2, 3};
  EXPECT_THROW(ProfileTable::from_json(bad), Error);
  bad = table.to_json();
  bad["forward"]["query_lengths"] = {300, 100};
  EXPECT_THROW(ProfileTable::from_json(bad), Error);
  EXPECT_THROW(ProfileTable::from_peak(0), Error);
  EXPECT_THROW(ProfileTable::load("/nonexistent.json"), Error);
  EXPECT_DOUBLE_EQ(ProfileTable::from_peak(1e12).forward_s(5, 5, 1e12), 1.0);
}

}  // namespace
}  // namespace fulcrum

#include "fulcrum/core/statistics.hpp"

#include "fulcrum/core/error.hpp"

#include <gtest/gtest.h>

namespace fulcrum {
namespace {

TEST(Median, MiddleValueOfUnsortedInput) {
  EXPECT_EQ(median({5, 1, 3}), 3);
  EXPECT_EQ(median({4, 1, 3, 2}), 3);  // the upper middle
  EXPECT_EQ(median({7}), 7);
  EXPECT_THROW(median({}), Error);
}

}  // namespace
}  // namespace fulcrum

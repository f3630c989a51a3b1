#include "fulcrum/core/error.hpp"

#include <gtest/gtest.h>

namespace fulcrum {
namespace {

TEST(Error, FailCarriesFormattedMessageAndBadInputKind) {
  try {
    fail("ranks = {}: must be >= 1", 0);
    FAIL() << "fail() returned";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "ranks = 0: must be >= 1");
    EXPECT_EQ(e.kind(), ErrorKind::kBadInput);
  }
}

TEST(Error, CheckNamesFileLineAndCondition) {
  try {
    int x = 3;
    FULCRUM_CHECK(x == 4, "x was {}", x);
    FAIL() << "check passed";
  } catch (const Error& e) {
    std::string message = e.what();
    EXPECT_NE(message.find("error_test.cpp"), std::string::npos);
    EXPECT_NE(message.find("x == 4"), std::string::npos);
    EXPECT_NE(message.find("x was 3"), std::string::npos);
    EXPECT_EQ(e.kind(), ErrorKind::kInternal);
  }
}

TEST(Error, DefaultKindIsInternal) {
  EXPECT_EQ(Error("x").kind(), ErrorKind::kInternal);
  EXPECT_STREQ(to_string(ErrorKind::kInternal), "internal error");
}

TEST(Error, CheckPassesSilently) { EXPECT_NO_THROW(FULCRUM_CHECK(1 + 1 == 2, "math")); }

}  // namespace
}  // namespace fulcrum

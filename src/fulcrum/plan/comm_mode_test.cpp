#include "fulcrum/plan/comm_mode.hpp"

#include "fulcrum/core/error.hpp"

#include <gtest/gtest.h>

namespace fulcrum {
namespace {

TEST(CommMode, NamesRoundTrip) {
  for (CommMode m : {CommMode::kSingleStream, CommMode::kPingPong, CommMode::kSignal}) {
    EXPECT_EQ(parse_comm_mode(to_string(m)), m);
  }
  EXPECT_FALSE(overlaps(CommMode::kSingleStream));
  EXPECT_TRUE(overlaps(CommMode::kSignal));
  EXPECT_FALSE(moves_data(CommMode::kSignal));
}

TEST(CommMode, UnknownNameNamesTheField) {
  try {
    parse_comm_mode("ring", "baseline-mode");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "baseline-mode = 'ring': must be one of single-stream, pingpong, signal");
    EXPECT_EQ(e.kind(), ErrorKind::kBadInput);
  }
}

}  // namespace
}  // namespace fulcrum

#include "fulcrum/core/simd.hpp"

#include "fulcrum/core/error.hpp"
#include "fulcrum/core/simd_path.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace fulcrum::simd {
namespace {

// exp2_bounded against fp64 std::exp2 over [-130, 0] in steps of 1/64 (the estimator's range): relative
// error within 4e-7 while 2^x is a normal float (the degree-6 polynomial's 1.2e-7 plus fp32 rounding; the
// worst seen on a finer grid is 2e-7), at most the smallest normal below that; 1 exactly at 0 (a row's
// maximum entry, which makes the estimator's row sums >= 1), 0 at and below -127 and at -inf.
TEST(Exp2Bounded, MatchesFp64WhereFloatsAreNormal) {
  for (int step = 0; step <= 130 * 64; step += kLanes) {
    Vec x;
    for (int l = 0; l < kLanes; ++l) x[l] = -static_cast<float>(step + l) / 64.0f;
    const Vec got = exp2_bounded(x);
    for (int l = 0; l < kLanes; ++l) {
      const double want = std::exp2(static_cast<double>(x[l]));
      if (x[l] >= -126.0f) {
        EXPECT_NEAR(got[l], want, 4e-7 * want) << "x = " << x[l];
      } else {
        EXPECT_LE(got[l], 0x1p-126f) << "x = " << x[l];
        EXPECT_GE(got[l], 0.0f) << "x = " << x[l];
      }
    }
  }
  const Vec ends = exp2_bounded(Vec{0.0f, -std::numeric_limits<float>::infinity(), -127.0f, -1000.0f});
  EXPECT_EQ(ends[0], 1.0f);
  EXPECT_EQ(ends[1], 0.0f);
  EXPECT_EQ(ends[2], 0.0f);
  EXPECT_EQ(ends[3], 0.0f);
}

// The same polynomial at every width the ISA versions use, bit for bit on this build's arithmetic.
TEST(Exp2Bounded, EveryWidthGivesTheSameValues) {
  for (int step = 0; step <= 130 * 64; step += 16) {
    Vec x;
    for (int l = 0; l < 16; ++l) x[l] = -static_cast<float>(step + l) / 64.0f;
    const Vec wide = exp2_bounded(x);
    for (int l = 0; l < 16; l += 4) {
      const Lanes<4>::Vec narrow = exp2_bounded(Lanes<4>::Vec{x[l], x[l + 1], x[l + 2], x[l + 3]});
      for (int i = 0; i < 4; ++i) EXPECT_EQ(narrow[i], wide[l + i]) << "x = " << x[l + i];
    }
  }
}

TEST(Isa, NamesRoundTripAndBadNamesAreRefusedNamingTheField) {
  for (const Isa isa : {Isa::kBaseline, Isa::kAvx2, Isa::kAvx512}) EXPECT_EQ(parse_isa(to_string(isa), "simd"), isa);
  try {
    parse_isa("sse4", "--simd");
    FAIL() << "sse4 accepted";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "--simd = 'sse4': expected avx512, avx2 or baseline");
  }
}

TEST(Isa, TheBestVersionRunsUnlessOneIsSelectedAndOnlyWhatTheCpuRuns) {
  EXPECT_TRUE(cpu_supports(Isa::kBaseline));
  EXPECT_TRUE(cpu_supports(best_isa()));
  const Isa before = active_isa();
  select_isa(Isa::kBaseline);
  EXPECT_EQ(active_isa(), Isa::kBaseline);
  EXPECT_NE(simd_path().find("baseline (run-time dispatch"), std::string::npos) << simd_path();
  if (!cpu_supports(Isa::kAvx512)) {
    EXPECT_THROW(select_isa(Isa::kAvx512), Error);
  }
  EXPECT_EQ(active_isa(), Isa::kBaseline);  // a refused selection changes nothing
  select_isa(before);
}

}  // namespace
}  // namespace fulcrum::simd

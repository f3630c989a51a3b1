#include "fulcrum/core/random.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

namespace fulcrum {
namespace {

TEST(Rng, SameSeedSameSequence) {
  Rng a(42), b(42), c(43);
  bool differs = false;
  for (int i = 0; i < 100; ++i) {
    const auto x = a.next_u64();
    EXPECT_EQ(x, b.next_u64());
    differs |= x != c.next_u64();
  }
  EXPECT_TRUE(differs);
}

TEST(Rng, UniformIntStaysInRangeAndHitsBothEnds) {
  Rng rng(7);
  bool saw_lo = false, saw_hi = false;
  for (int i = 0; i < 10000; ++i) {
    const auto v = rng.uniform_int(-3, 5);
    ASSERT_GE(v, -3);
    ASSERT_LE(v, 5);
    saw_lo |= v == -3;
    saw_hi |= v == 5;
  }
  EXPECT_TRUE(saw_lo && saw_hi);
}

TEST(Rng, NormalHasUnitMomentsWithinSamplingError) {
  Rng rng(1);
  const int n = 200000;
  double sum = 0, sum_sq = 0;
  for (int i = 0; i < n; ++i) {
    const double x = rng.normal();
    sum += x;
    sum_sq += x * x;
  }
  const double mean = sum / n;
  EXPECT_NEAR(mean, 0.0, 5.0 / std::sqrt(n));  // 5 standard errors
  EXPECT_NEAR(sum_sq / n - mean * mean, 1.0, 0.02);
}

TEST(Rng, ShuffleIsAPermutation) {
  Rng rng(3);
  std::vector<int> v(50);
  for (int i = 0; i < 50; ++i) v[i] = i;
  rng.shuffle(v);
  std::vector<int> sorted = v;
  std::sort(sorted.begin(), sorted.end());
  for (int i = 0; i < 50; ++i) EXPECT_EQ(sorted[i], i);
  EXPECT_NE(v, sorted);
}

}  // namespace
}  // namespace fulcrum

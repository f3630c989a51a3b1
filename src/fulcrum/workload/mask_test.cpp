#include "fulcrum/workload/mask.hpp"

#include "fulcrum/core/error.hpp"
#include "fulcrum/core/random.hpp"

#include <gtest/gtest.h>

namespace fulcrum {
namespace {

std::vector<MaskSpec> all_masks() {
  return {MaskSpec::causal(), MaskSpec::full(), MaskSpec::sliding_window(7), MaskSpec::lambda(3, 5),
          MaskSpec::lambda(0, 4), MaskSpec::sliding_window(1)};
}

Tokens brute_pairs(const MaskSpec& mask, Range q, Range k, Tokens len) {
  Tokens count = 0;
  for (Tokens row = std::max<Tokens>(q.begin, 0); row < std::min(q.end, len); ++row) {
    for (const auto& r : mask.visible(row, len)) count += intersect(r, intersect(k, {0, len})).size();
  }
  return count;
}

TEST(MaskSpec, VisibleSetsMatchTheirDefinitions) {
  EXPECT_EQ(MaskSpec::causal().visible(4, 10), (SmallRanges{{0, 5}}));
  EXPECT_EQ(MaskSpec::full().visible(4, 10), (SmallRanges{{0, 10}}));
  EXPECT_EQ(MaskSpec::sliding_window(3).visible(4, 10), (SmallRanges{{2, 5}}));
  EXPECT_EQ(MaskSpec::lambda(2, 3).visible(9, 12), (SmallRanges{{0, 2}, {7, 10}}));
  EXPECT_EQ(MaskSpec::lambda(2, 3).visible(3, 12), (SmallRanges{{0, 4}}));
}

TEST(MaskSpec, ClosedFormPairCountsEqualBruteForceOnRandomRectangles) {
  Rng rng(5);
  for (const auto& mask : all_masks()) {
    for (int trial = 0; trial < 400; ++trial) {
      const Tokens len = rng.uniform_int(1, 40);
      Range q{rng.uniform_int(0, len), 0}, k{rng.uniform_int(0, len), 0};
      q.end = rng.uniform_int(q.begin, len);
      k.end = rng.uniform_int(k.begin, len);
      ASSERT_EQ(mask.count_pairs(q, k, len), brute_pairs(mask, q, k, len))
          << mask.to_string() << " q=[" << q.begin << "," << q.end << ") k=[" << k.begin << "," << k.end << ")";
    }
  }
}

TEST(MaskSpec, KeysNeededIsExactlyTheUnionOfVisibleKeys) {
  Rng rng(6);
  for (const auto& mask : all_masks()) {
    for (int trial = 0; trial < 300; ++trial) {
      const Tokens len = rng.uniform_int(1, 30);
      Range q{rng.uniform_int(0, len - 1), 0}, k{rng.uniform_int(0, len - 1), 0};
      q.end = rng.uniform_int(q.begin + 1, len);
      k.end = rng.uniform_int(k.begin + 1, len);
      RangeSet brute;
      for (Tokens row = q.begin; row < q.end; ++row) {
        for (const auto& r : mask.visible(row, len)) brute.add(intersect(r, k));
      }
      ASSERT_EQ(mask.keys_needed(q, k, len).to_vector(), brute.ranges()) << mask.to_string();
    }
  }
}

TEST(MaskSpec, ClassifyTiles) {
  const auto causal = MaskSpec::causal();
  EXPECT_EQ(causal.classify({0, 4}, {4, 8}, 16), TileKind::kEmpty);
  EXPECT_EQ(causal.classify({4, 8}, {0, 4}, 16), TileKind::kFull);
  EXPECT_EQ(causal.classify({4, 8}, {4, 8}, 16), TileKind::kPartial);
}

TEST(MaskSpec, ParseRoundTripsAndRejectsBadText) {
  for (const auto& mask : all_masks()) EXPECT_EQ(MaskSpec::parse(mask.to_string()), mask);
  EXPECT_THROW(MaskSpec::parse("window:0"), Error);
  EXPECT_THROW(MaskSpec::parse("window:x"), Error);
  EXPECT_THROW(MaskSpec::parse("diagonal"), Error);
  EXPECT_THROW(MaskSpec::parse("lambda:-1:4"), Error);
}

}  // namespace
}  // namespace fulcrum

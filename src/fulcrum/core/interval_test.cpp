#include "fulcrum/core/interval.hpp"

#include "fulcrum/core/random.hpp"

#include <gtest/gtest.h>

#include <set>

namespace fulcrum {
namespace {

TEST(RangeSet, MergesOverlappingAndAdjacent) {
  RangeSet s;
  s.add({10, 20});
  s.add({30, 40});
  s.add({20, 25});
  EXPECT_EQ(s.ranges(), (std::vector<Range>{{10, 25}, {30, 40}}));
  s.add({5, 35});
  EXPECT_EQ(s.ranges(), (std::vector<Range>{{5, 40}}));
  EXPECT_EQ(s.size(), 35);
}

TEST(RangeSet, MissingMatchesBruteForceOnRandomSets) {
  Rng rng(11);
  for (int trial = 0; trial < 200; ++trial) {
    RangeSet s;
    std::set<Tokens> brute;
    for (int i = 0; i < 6; ++i) {
      Tokens b = rng.uniform_int(0, 60), e = b + rng.uniform_int(0, 15);
      s.add({b, e});
      for (Tokens t = b; t < e; ++t) brute.insert(t);
    }
    EXPECT_EQ(s.size(), static_cast<Tokens>(brute.size()));
    Range q{rng.uniform_int(0, 40), 0};
    q.end = q.begin + rng.uniform_int(0, 40);
    Tokens missing_count = 0;
    for (const auto& m : s.missing(q)) {
      for (Tokens t = m.begin; t < m.end; ++t) EXPECT_FALSE(brute.count(t));
      missing_count += m.size();
    }
    Tokens expected = 0;
    for (Tokens t = q.begin; t < q.end; ++t) expected += brute.count(t) ? 0 : 1;
    EXPECT_EQ(missing_count, expected);
  }
}

}  // namespace
}  // namespace fulcrum

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

// Pieces cover exactly the (token, head) cells not yet held, each once; with every head holding the same
// tokens they are RangeSet::missing's gaps over all the heads.
TEST(PerHeadRangeSet, PiecesAreTheMissingCellsExactlyOnce) {
  Rng rng(12);
  for (int trial = 0; trial < 300; ++trial) {
    const int heads = static_cast<int>(rng.uniform_int(1, 5));
    PerHeadRangeSet set(heads);
    std::set<std::pair<Tokens, int>> held;
    for (int i = 0; i < 8; ++i) {
      const Range tokens{rng.uniform_int(0, 50), 0};
      const Range r{tokens.begin, tokens.begin + rng.uniform_int(0, 20)};
      const int h0 = static_cast<int>(rng.uniform_int(0, heads - 1));
      const int h1 = static_cast<int>(rng.uniform_int(h0 + 1, heads));
      std::set<std::pair<Tokens, int>> want, got;
      for (Tokens t = r.begin; t < r.end; ++t) {
        for (int h = h0; h < h1; ++h) {
          if (!held.count({t, h})) want.insert({t, h});
        }
      }
      for (const auto& p : set.add_missing(r, h0, h1)) {
        ASSERT_TRUE(p.head_begin >= h0 && p.head_begin < p.head_end && p.head_end <= h1 && !p.tokens.empty());
        for (Tokens t = p.tokens.begin; t < p.tokens.end; ++t) {
          for (int h = p.head_begin; h < p.head_end; ++h) EXPECT_TRUE(got.insert({t, h}).second) << "twice";
        }
      }
      EXPECT_EQ(got, want) << "trial " << trial;
      for (Tokens t = r.begin; t < r.end; ++t) {
        for (int h = h0; h < h1; ++h) held.insert({t, h});
      }
    }
  }
  PerHeadRangeSet same(3);
  RangeSet reference;
  for (Range r : {Range{10, 20}, Range{30, 40}, Range{0, 50}}) {
    std::vector<PerHeadRangeSet::Piece> expected;
    for (const auto& gap : reference.missing(r)) expected.push_back({gap, 0, 3});
    EXPECT_EQ(same.add_missing(r, 0, 3), expected);
    reference.add(r);
  }
  // Heads 1-2 of [0, 10) held: [0, 10) lacks head 0 only, [10, 20) every head, as two pieces.
  PerHeadRangeSet split(3);
  split.add_missing({0, 10}, 1, 3);
  EXPECT_EQ(split.add_missing({0, 20}, 0, 3), (std::vector<PerHeadRangeSet::Piece>{{{0, 10}, 0, 1}, {{10, 20}, 0, 3}}));
}

TEST(HeadRange, KvHeadsReadAreTheGroupsOfTheQHeads) {
  EXPECT_EQ(kv_heads_read({}, 8, 2), HeadRange{});
  EXPECT_EQ(kv_heads_read({0, 4}, 8, 2), (HeadRange{0, 1}));
  EXPECT_EQ(kv_heads_read({4, 8}, 8, 2), (HeadRange{1, 2}));
  EXPECT_EQ(kv_heads_read({3, 8}, 8, 2), HeadRange{}) << "heads 3-7 read both kv heads: all";
  EXPECT_EQ(kv_heads_read({0, 3}, 8, 2), (HeadRange{0, 1}));
  EXPECT_EQ(kv_heads_read({5, 6}, 8, 8), (HeadRange{5, 6}));
  EXPECT_EQ((HeadRange{0, 8}.normalized(8)), HeadRange{});
  EXPECT_EQ((HeadRange{0, 7}.normalized(8)), (HeadRange{0, 7}));
}

}  // namespace
}  // namespace fulcrum

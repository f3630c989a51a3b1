#include "fulcrum/sparse/vertical_slash.hpp"

#include "fulcrum/core/random.hpp"

#include <gtest/gtest.h>

#include <algorithm>

namespace fulcrum::sparse {
namespace {

TEST(SelectByMass, KeepsTheFewestLargestReachingGammaAndEntryZero) {
  const std::vector<double> s = {0.1, 0.5, 0.3, 0.1};
  EXPECT_EQ(select_by_mass(s, 0.8, 100), (std::vector<Tokens>{0, 1, 2}));   // 0.5 + 0.3 reaches 0.8
  EXPECT_EQ(select_by_mass(s, 0.81, 100), (std::vector<Tokens>{0, 1, 2}));  // tie 0.1/0.1: index 0, not 3
  EXPECT_EQ(select_by_mass(s, 0.5, 100), (std::vector<Tokens>{0, 1}));
  EXPECT_EQ(select_by_mass(s, 1.0, 1), (std::vector<Tokens>{0, 1}));  // the cap binds
  const std::vector<double> flat = {0.25, 0.25, 0.25, 0.25};
  EXPECT_EQ(select_by_mass(flat, 0.5, 100), (std::vector<Tokens>{0, 1}));  // ties: lower index first
  const std::vector<double> late = {0.0, 0.0, 1.0};
  EXPECT_EQ(select_by_mass(late, 0.9, 100), (std::vector<Tokens>{0, 2}));  // 0 kept although it scores 0
}

TEST(SlashBlockOffsets, FloorAndCeilingOfEveryOffset) {
  const std::vector<Tokens> slashes = {0, 64, 65, 130, 127};
  EXPECT_EQ(slash_block_offsets(slashes, 64), (std::vector<Tokens>{0, 1, 2, 3}));
  EXPECT_EQ(slash_block_offsets(slashes, 1), (std::vector<Tokens>{0, 64, 65, 127, 130}));
}

TEST(SlashBlockOffsets, EveryPairOnASelectedSlashIsKept) {
  for (const Tokens g : {1, 3, 64}) {
    const std::vector<Tokens> slashes = {0, 5, 64, 100, 191};
    const VerticalSlashIndex index{g, {}, slash_block_offsets(slashes, g), 0.0};
    for (const Tokens d : slashes) {
      for (Tokens q = d; q < 400; ++q) ASSERT_TRUE(keeps(index, q, q - d)) << "G " << g << " q " << q << " d " << d;
    }
  }
}

// The closed-form count against asking keeps() about every pair, on random indices.
TEST(KeptPairFraction, MatchesCountingEveryPair) {
  Rng rng(7);
  for (int trial = 0; trial < 40; ++trial) {
    const Tokens n = rng.uniform_int(1, 300), g = rng.uniform_int(1, 70);
    VerticalSlashIndex index{g, {}, {}, 0.0};
    for (Tokens k = 0; k < n; ++k) {
      if (rng.uniform() < 0.05) index.verticals.push_back(k);
    }
    for (Tokens o = 0; o <= (n - 1) / g + 1; ++o) {
      if (rng.uniform() < 0.3) index.block_offsets.push_back(o);
    }
    Tokens kept = 0;
    for (Tokens q = 0; q < n; ++q) {
      for (Tokens k = 0; k <= q; ++k) kept += keeps(index, q, k) ? 1 : 0;
    }
    EXPECT_DOUBLE_EQ(kept_pair_fraction(index, n), static_cast<double>(kept) / static_cast<double>(n * (n + 1) / 2))
        << "n " << n << " G " << g;
  }
}

}  // namespace
}  // namespace fulcrum::sparse

// Each mask kind on small hand-checked examples, its text form, and its factory's validation.
#include "fulcrum/workload/mask.hpp"

#include "fulcrum/core/error.hpp"

#include <gtest/gtest.h>

#include <set>
#include <string_view>

namespace fulcrum {
namespace {

// The message of the Error that parsing `text` throws ("" if it does not throw).
std::string parse_error(std::string_view text) {
  try {
    MaskSpec::parse(text);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(MaskKinds, VisibleSetsMatchTheirDefinitions) {
  EXPECT_EQ(MaskSpec::causal().visible(4, 10), (SmallRanges{{0, 5}}));
  EXPECT_EQ(MaskSpec::full().visible(4, 10), (SmallRanges{{0, 10}}));
  EXPECT_EQ(MaskSpec::sliding_window(3).visible(4, 10), (SmallRanges{{2, 5}}));
  EXPECT_EQ(MaskSpec::lambda(2, 3).visible(9, 12), (SmallRanges{{0, 2}, {7, 10}}));
  EXPECT_EQ(MaskSpec::lambda(2, 3).visible(3, 12), (SmallRanges{{0, 4}}));
}

TEST(MaskKinds, CausalBlockwiseSeesSinkWindowAndTheTestBlockSeesAll) {
  const auto m = MaskSpec::causal_blockwise(4, 1);      // 22 tokens: blocks 0..5, block 5 = [20, 22) is the test block
  EXPECT_EQ(m.visible(2, 22), (SmallRanges{{0, 3}}));   // block 0
  EXPECT_EQ(m.visible(6, 22), (SmallRanges{{0, 7}}));   // block 1: window starts at block 0
  EXPECT_EQ(m.visible(9, 22), (SmallRanges{{0, 10}}));  // block 2: window [4, ..) touches the sink
  EXPECT_EQ(m.visible(13, 22), (SmallRanges{{0, 4}, {8, 14}}));  // block 3
  EXPECT_EQ(m.visible(21, 22), (SmallRanges{{0, 22}}));          // test block
  EXPECT_EQ(m.visible(19, 20), (SmallRanges{{0, 20}}));          // with 20 tokens block 4 is the test block
  EXPECT_EQ(MaskSpec::causal_blockwise(4, 0).visible(13, 22), (SmallRanges{{0, 4}, {12, 14}}));
  EXPECT_TRUE(m.allows(13, 3, 22));
  EXPECT_FALSE(m.allows(13, 4, 22));
  EXPECT_FALSE(m.allows(13, 14, 22));
}

TEST(MaskKinds, SharedQuestionAnswersSeeTheQuestionAndThemselves) {
  // 20 tokens, 25 % question: question [0, 5), answers [5, 10), [10, 15), [15, 20).
  const auto m = MaskSpec::shared_question(3, 25);
  EXPECT_EQ(m.visible(3, 20), (SmallRanges{{0, 4}}));
  EXPECT_EQ(m.visible(7, 20), (SmallRanges{{0, 8}}));
  EXPECT_EQ(m.visible(12, 20), (SmallRanges{{0, 5}, {10, 13}}));
  EXPECT_EQ(m.visible(19, 20), (SmallRanges{{0, 5}, {15, 20}}));
  // 22 tokens, 10 %: question [0, 2), rest 20 in 3 answers of 6, 6 and 8.
  const auto r = MaskSpec::shared_question(3, 10);
  EXPECT_EQ(r.visible(21, 22), (SmallRanges{{0, 2}, {14, 22}}));
  EXPECT_EQ(r.visible(13, 22), (SmallRanges{{0, 2}, {8, 14}}));
  // Tiny documents: the question takes at least one token, empty answers are allowed.
  EXPECT_EQ(MaskSpec::shared_question(5, 1).visible(0, 1), (SmallRanges{{0, 1}}));
  EXPECT_EQ(MaskSpec::shared_question(5, 1).visible(2, 3), (SmallRanges{{0, 3}}));
}

TEST(MaskKinds, VerticalSlashSeesColumnsAndDiagonals) {
  const auto m = MaskSpec::vertical_slash({1, 6}, {0, 3});
  EXPECT_EQ(m.row_bits(8, 0, 10, 20), (1u << 1) | (1u << 6) | (1u << 8) | (1u << 5));
  EXPECT_EQ(m.row_bits(8, 4, 4, 20), (1u << 2) | (1u << 1));                  // keys 4..7: 5 (slash 3) and 6 (column)
  EXPECT_EQ(m.row_bits(0, 0, 64, 20), 1u);                                    // the column at 1 is in the future
  EXPECT_EQ(m.visible(8, 20), (SmallRanges{{0, 9}}));                         // planning sees the causal hull
  EXPECT_EQ(m.count_pairs({0, 20}, {0, 20}, 20), 19 + 14 + 20 + 17 - 2 - 2);  // minus (1,1), (4,1), (6,6), (9,6)
  EXPECT_EQ(m.classify({0, 4}, {8, 12}, 20), TileKind::kEmpty);
  EXPECT_EQ(m.classify({8, 12}, {0, 4}, 20), TileKind::kPartial);
}

TEST(MaskKinds, BlockSparseIsListedBlocksUnderCausal) {
  const auto m = MaskSpec::block_sparse(4, {{2, 0}, {2, 2}, {1, 1}});
  EXPECT_TRUE(m.allows(9, 3, 12));
  EXPECT_FALSE(m.allows(9, 5, 12));
  EXPECT_FALSE(m.allows(9, 10, 12));  // listed block, but in the future
  EXPECT_EQ(m.row_bits(9, 0, 12, 12), 0b0011'0000'1111u);
  EXPECT_EQ(m.count_pairs({0, 12}, {0, 12}, 12), 16 + 10 + 10);
  EXPECT_EQ(m.classify({8, 12}, {0, 4}, 12), TileKind::kFull);
  EXPECT_EQ(m.classify({8, 12}, {4, 8}, 12), TileKind::kEmpty);
  EXPECT_EQ(m.classify({8, 12}, {8, 12}, 12), TileKind::kPartial);
}

TEST(MaskKinds, VerticalSlashBlocksSeesBlockDiagonalsAndColumns) {
  // Blocks of 4; offsets {0, 2}; column 5. Row 13 (block 3) sees block 3 up to itself, block 1, key 5.
  const auto m = MaskSpec::vertical_slash_blocks(4, {5}, {0, 2});
  EXPECT_EQ(m.row_bits(13, 0, 16, 16), 0b0011'0000'1111'0000u | (1u << 5));
  EXPECT_EQ(m.row_bits(9, 0, 16, 16), 0b0000'0011'0000'1111u | (1u << 5));  // block 2: blocks 2 and 0, key 5
  EXPECT_TRUE(m.allows(13, 6, 16));
  EXPECT_FALSE(m.allows(13, 8, 16));
  EXPECT_FALSE(m.allows(5, 6, 16));  // never above the diagonal
  EXPECT_EQ(m.visible(13, 16), (SmallRanges{{0, 14}}));
  // 16 tokens: diagonal tiles 4 x 10, offset-2 tiles (2,0) and (3,1) 2 x 16, column 5 in rows 5..15
  // outside those tiles: rows 8..11 (block 2 - block 1 = 1).
  EXPECT_EQ(m.count_pairs({0, 16}, {0, 16}, 16), 40 + 32 + 4);
  EXPECT_EQ(m.classify({8, 12}, {0, 4}, 16), TileKind::kFull);
  EXPECT_EQ(m.classify({8, 12}, {4, 8}, 16), TileKind::kPartial);  // only column 5
  EXPECT_EQ(m.classify({12, 16}, {0, 4}, 16), TileKind::kEmpty);
  // One-token blocks and the offset 0 only: the diagonal.
  const auto diagonal = MaskSpec::vertical_slash_blocks(1, {}, {0});
  for (Tokens q = 0; q < 9; ++q) {
    for (Tokens k = 0; k < 9; ++k) EXPECT_EQ(diagonal.allows(q, k, 9), q == k) << q << " " << k;
  }
  EXPECT_EQ(diagonal.document_pairs(9), 9);
  // One block over the whole document at offset 0: causal.
  const auto causal = MaskSpec::vertical_slash_blocks(64, {}, {0});
  EXPECT_EQ(causal.count_pairs({3, 40}, {10, 50}, 50), MaskSpec::causal().count_pairs({3, 40}, {10, 50}, 50));
}

TEST(MaskKinds, StripedPermutesTheDocumentBlockByBlock) {
  // 16 tokens over 2 ranks in blocks of 4: rank 0 holds blocks 0, 2, rank 1 blocks 1, 3.
  const auto m = MaskSpec::striped(MaskSpec::causal(), 2, 4);
  const Tokens expected[] = {0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 12, 13, 14, 15};
  for (Tokens p = 0; p < 16; ++p) {
    EXPECT_EQ(m.source_position(p, 16), expected[p]) << p;
    EXPECT_EQ(m.slot_of(expected[p], 16), p) << p;
  }
  // Token-striped over 4 ranks: slot p holds position (p % 4) * 4 + p / 4.
  const auto tokens = MaskSpec::striped(MaskSpec::causal(), 4, 1);
  EXPECT_EQ(tokens.source_position(1, 16), 4);
  EXPECT_EQ(tokens.source_position(5, 16), 5);
  EXPECT_EQ(tokens.source_position(15, 16), 15);
  EXPECT_EQ(tokens.source_position(4, 16), 1);
  // Slot 8 holds position 4: it sees slots 0..3 (positions 0..3), not slot 4 (position 8).
  EXPECT_EQ(m.row_bits(8, 0, 16, 16), 0b0000'0001'0000'1111u);
  EXPECT_TRUE(m.allows(4, 11, 16));                     // position 8 sees position 7
  EXPECT_EQ(m.visible(0, 16), (SmallRanges{{0, 16}}));  // the hull is the full square
  EXPECT_EQ(m.keys_needed({0, 1}, {3, 9}, 16), (SmallRanges{{3, 9}}));
  EXPECT_TRUE(m.row_breakpoints({0, 7, 16}, 16).empty());
  EXPECT_EQ(m.document_pairs(16), MaskSpec::causal().document_pairs(16));
  EXPECT_EQ(m.count_pairs({0, 8}, {8, 16}, 16), 4 * 4);  // rank 0's block 2 sees rank 1's block 1 only
  EXPECT_EQ(m.classify({4, 8}, {8, 12}, 16), TileKind::kFull);
  EXPECT_EQ(m.classify({8, 12}, {4, 8}, 16), TileKind::kEmpty);
  EXPECT_EQ(MaskSpec::causal().source_position(7, 16), 7);
  EXPECT_EQ(MaskSpec::full().slot_of(7, 16), 7);
}

TEST(MaskKinds, StripedIsABijectionAndOneRankIsTheInnerMask) {
  const MaskSpec inner = MaskSpec::vertical_slash_blocks(3, {1, 10}, {0, 2});
  for (int ranks : {1, 2, 3, 5}) {
    for (Tokens block : {1, 2, 3, 7}) {
      const auto m = MaskSpec::striped(inner, ranks, block);
      const Tokens len = 2 * ranks * block;
      std::vector<char> seen(static_cast<std::size_t>(len), 0);
      for (Tokens p = 0; p < len; ++p) {
        const Tokens t = m.source_position(p, len);
        ASSERT_TRUE(t >= 0 && t < len && seen[static_cast<std::size_t>(t)] == 0) << m.to_string() << " " << p;
        seen[static_cast<std::size_t>(t)] = 1;
        ASSERT_EQ(m.slot_of(t, len), p) << m.to_string();
      }
      EXPECT_EQ(m.document_pairs(len), inner.document_pairs(len)) << m.to_string();
      if (ranks != 1) continue;
      for (Tokens q = 0; q < len; ++q) {  // one rank: slot order is position order
        ASSERT_EQ(m.row_bits(q, 0, static_cast<int>(len), len), inner.row_bits(q, 0, static_cast<int>(len), len));
      }
    }
  }
}

TEST(MaskKinds, StripedLengthsMustBeMultiplesOfRanksTimesBlock) {
  const auto m = MaskSpec::striped(MaskSpec::causal(), 4, 64);
  EXPECT_EQ(m.length_multiple(), 256);
  EXPECT_NO_THROW(m.check_length(1024));
  try {
    m.check_length(1000, "documents[2]");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kBadInput);
    EXPECT_STREQ(e.what(),
                 "documents[2]: mask striped = 'striped:4:64:causal': document length = 1000 must be a multiple of "
                 "ranks x block = 4 x 64 = 256");
  }
  const auto nested = MaskSpec::striped(MaskSpec::striped(MaskSpec::causal(), 3, 1), 2, 2);
  EXPECT_EQ(nested.length_multiple(), 12);
  EXPECT_THROW(nested.check_length(8), Error);  // a multiple of 4, not of 3
  EXPECT_NO_THROW(MaskSpec::causal().check_length(7));
}

// Every 64-slot tile of a 4096-token token-striped document over 8 ranks, classified, and rank-by-rank
// pair counts: what kernels and planners ask. Not timed here; it must only stay a sum over runs.
TEST(MaskKinds, StripedCountsOfALongTokenStripedDocumentAgreeWithTheInnerMask) {
  const MaskSpec inner = MaskSpec::vertical_slash_blocks(64, {0, 100, 2000}, {0, 1, 7, 30});
  const auto m = MaskSpec::striped(inner, 8, 1);
  const Tokens len = 4096, n = len / 8;
  EXPECT_EQ(m.document_pairs(len), inner.document_pairs(len));
  Tokens by_ranks = 0;
  for (Tokens a = 0; a < 8; ++a) {
    for (Tokens b = 0; b < 8; ++b) by_ranks += m.count_pairs({a * n, (a + 1) * n}, {b * n, (b + 1) * n}, len);
  }
  EXPECT_EQ(by_ranks, inner.document_pairs(len));
  Tokens by_tiles = 0;
  for (Tokens q = 0; q < len; q += 64) {
    for (Tokens k = 0; k < len; k += 64) {
      const Tokens pairs = m.count_pairs({q, q + 64}, {k, k + 64}, len);
      by_tiles += pairs;
      EXPECT_EQ(m.classify({q, q + 64}, {k, k + 64}, len), pairs == 0         ? TileKind::kEmpty
                                                           : pairs == 64 * 64 ? TileKind::kFull
                                                                              : TileKind::kPartial);
    }
  }
  EXPECT_EQ(by_tiles, inner.document_pairs(len));
}

TEST(MaskKinds, FactoriesSortDeduplicateAndValidate) {
  const auto v = MaskSpec::vertical_slash({9, 2, 9, 0}, {3, 0, 3});
  EXPECT_EQ(v.lists->verticals, (std::vector<Tokens>{0, 2, 9}));
  EXPECT_EQ(v.lists->slashes, (std::vector<Tokens>{0, 3}));
  const auto b = MaskSpec::block_sparse(8, {{3, 1}, {0, 0}, {3, 1}, {1, 0}});
  EXPECT_EQ(b.lists->block_pairs, (std::vector<std::pair<Tokens, Tokens>>{{0, 0}, {1, 0}, {3, 1}}));
  EXPECT_THROW(MaskSpec::vertical_slash({-1}, {}), Error);
  EXPECT_THROW(MaskSpec::vertical_slash({}, {-2}), Error);
  EXPECT_THROW(MaskSpec::block_sparse(0, {}), Error);
  EXPECT_THROW(MaskSpec::block_sparse(4, {{-1, 0}}), Error);
  EXPECT_THROW(MaskSpec::causal_blockwise(0, 1), Error);
  EXPECT_THROW(MaskSpec::causal_blockwise(4, -1), Error);
  EXPECT_THROW(MaskSpec::shared_question(0, 50), Error);
  EXPECT_THROW(MaskSpec::shared_question(2, 100), Error);
  EXPECT_THROW(MaskSpec::shared_question(2, 0), Error);
  const auto g = MaskSpec::vertical_slash_blocks(64, {9, 0, 9}, {5, 0, 5, 1});
  EXPECT_EQ(g.lists->verticals, (std::vector<Tokens>{0, 9}));
  EXPECT_EQ(g.lists->block_offsets, (std::vector<Tokens>{0, 1, 5}));
  EXPECT_THROW(MaskSpec::vertical_slash_blocks(0, {}, {0}), Error);
  EXPECT_THROW(MaskSpec::vertical_slash_blocks(4, {-1}, {0}), Error);
  EXPECT_THROW(MaskSpec::vertical_slash_blocks(4, {}, {-1}), Error);
  EXPECT_THROW(MaskSpec::striped(MaskSpec::causal(), 0, 4), Error);
  EXPECT_THROW(MaskSpec::striped(MaskSpec::causal(), 4, 0), Error);
}

TEST(MaskKinds, CopiesShareIndexListsAndCompareByContent) {
  const auto a = MaskSpec::vertical_slash({1, 2}, {0});
  const auto copy = a;
  EXPECT_EQ(copy.lists.get(), a.lists.get());
  const auto rebuilt = MaskSpec::vertical_slash({2, 1}, {0});
  EXPECT_NE(rebuilt.lists.get(), a.lists.get());
  EXPECT_EQ(rebuilt, a);
  EXPECT_NE(MaskSpec::vertical_slash({1, 2}, {1}), a);
  EXPECT_NE(MaskSpec::block_sparse(4, {{0, 0}}), MaskSpec::block_sparse(8, {{0, 0}}));
  EXPECT_NE(MaskSpec::causal_blockwise(4, 1), MaskSpec::causal_blockwise(4, 2));
  EXPECT_NE(MaskSpec::shared_question(3, 20), MaskSpec::shared_question(2, 20));
  EXPECT_NE(MaskSpec::vertical_slash_blocks(4, {1}, {0}), MaskSpec::vertical_slash_blocks(8, {1}, {0}));
  EXPECT_NE(MaskSpec::vertical_slash_blocks(4, {1}, {0}), MaskSpec::vertical_slash_blocks(4, {1}, {1}));
  EXPECT_EQ(MaskSpec::striped(MaskSpec::vertical_slash({1}, {0}), 2, 4),
            MaskSpec::striped(MaskSpec::vertical_slash({1}, {0}), 2, 4));
  EXPECT_NE(MaskSpec::striped(MaskSpec::causal(), 2, 4), MaskSpec::striped(MaskSpec::causal(), 4, 2));
  EXPECT_NE(MaskSpec::striped(MaskSpec::causal(), 2, 4), MaskSpec::striped(MaskSpec::full(), 2, 4));
  EXPECT_EQ(MaskSpec::causal(), MaskSpec::parse("causal"));
}

TEST(MaskKinds, ParseRoundTrips) {
  const MaskSpec masks[] = {MaskSpec::causal(),
                            MaskSpec::full(),
                            MaskSpec::sliding_window(7),
                            MaskSpec::lambda(3, 5),
                            MaskSpec::causal_blockwise(64, 2),
                            MaskSpec::shared_question(4, 25),
                            MaskSpec::vertical_slash({0, 64, 900}, {0, 1, 2}),
                            MaskSpec::vertical_slash({}, {0, 1, 2}),
                            MaskSpec::vertical_slash({5}, {}),
                            MaskSpec::vertical_slash({}, {}),
                            MaskSpec::block_sparse(128, {{0, 0}, {1, 0}, {1, 1}}),
                            MaskSpec::block_sparse(16, {}),
                            MaskSpec::vertical_slash_blocks(64, {0, 17}, {0, 1, 5}),
                            MaskSpec::vertical_slash_blocks(128, {}, {0}),
                            MaskSpec::vertical_slash_blocks(1, {}, {}),
                            MaskSpec::striped(MaskSpec::causal(), 8, 1),
                            MaskSpec::striped(MaskSpec::vertical_slash_blocks(64, {0, 17}, {0, 1, 5}), 4, 64),
                            MaskSpec::striped(MaskSpec::striped(MaskSpec::lambda(4, 64), 2, 1), 3, 8)};
  for (const auto& mask : masks) EXPECT_EQ(MaskSpec::parse(mask.to_string()), mask) << mask.to_string();
  EXPECT_EQ(MaskSpec::vertical_slash({}, {0, 1, 2}).to_string(), "vslash::0,1,2");
  EXPECT_EQ(MaskSpec::block_sparse(128, {{1, 0}, {0, 0}}).to_string(), "blocksparse:128:0-0,1-0");
  EXPECT_EQ(MaskSpec::parse("blockwise:32:4"), MaskSpec::causal_blockwise(32, 4));
  EXPECT_EQ(MaskSpec::parse("shared-question:3:40"), MaskSpec::shared_question(3, 40));
  EXPECT_EQ(MaskSpec::parse("vslash:9,1:0"), MaskSpec::vertical_slash({1, 9}, {0}));
  EXPECT_EQ(MaskSpec::parse("vsblocks:64:17,0:5,0,1"), MaskSpec::vertical_slash_blocks(64, {0, 17}, {0, 1, 5}));
  EXPECT_EQ(MaskSpec::parse("striped:4:64:vsblocks:64:0,17:0,1,5").to_string(), "striped:4:64:vsblocks:64:0,17:0,1,5");
  EXPECT_EQ(MaskSpec::parse("striped:4:64:vsblocks:64:0,17:0,1,5"),
            MaskSpec::striped(MaskSpec::vertical_slash_blocks(64, {0, 17}, {0, 1, 5}), 4, 64));
  EXPECT_EQ(MaskSpec::parse("striped:2:1:striped:3:8:window:5"),
            MaskSpec::striped(MaskSpec::striped(MaskSpec::sliding_window(5), 3, 8), 2, 1));
}

TEST(MaskKinds, ParseRejectsBadTextNamingTheField) {
  const std::pair<const char*, const char*> cases[] = {
      {"window:0", "mask window = 0: must be >= 1"},
      {"window:x", "mask window = 'x'"},
      {"diagonal", "mask = 'diagonal'"},
      {"lambda:-1:4", "mask sink = -1"},
      {"blockwise:0:1", "mask block = 0: must be >= 1"},
      {"blockwise:4:-1", "mask window blocks = -1: must be >= 0"},
      {"blockwise:4", "mask = 'blockwise:4'"},
      {"shared-question:0:50", "mask answers = 0: must be >= 1"},
      {"shared-question:2:100", "mask question percent = 100: must be in [1, 99]"},
      {"shared-question:2:0", "mask question percent = 0: must be in [1, 99]"},
      {"vslash:1,-2:0", "mask vertical = -2: must be >= 0"},
      {"vslash:1:0,x", "mask slash = 'x'"},
      {"vslash:1,,2:0", "mask vertical = ''"},
      {"vslash:1", "mask = 'vslash:1'"},
      {"blocksparse:0:0-0", "mask block = 0: must be >= 1"},
      {"blocksparse:4:0-0,1", "mask block pair = '1': expected QB-KB"},
      {"blocksparse:4:0-0,1-x", "mask key block = 'x'"},
      {"blocksparse:4:y-0", "mask query block = 'y'"},
      {"vsblocks:0:1:0", "mask block = 0: must be >= 1"},
      {"vsblocks:4:1,-2:0", "mask vertical = -2: must be >= 0"},
      {"vsblocks:4:1:0,-1", "mask block offset = -1: must be >= 0"},
      {"vsblocks:4:1:x", "mask block offset = 'x'"},
      {"vsblocks:4:1", "mask = 'vsblocks:4:1'"},
      {"striped:0:4:causal", "mask ranks = 0: must be in [1, 2147483647]"},
      {"striped:3000000000:4:causal", "mask ranks = 3000000000: must be in [-1073741824, 1073741824]"},
      {"striped:2:0:causal", "mask block = 0: must be >= 1"},
      {"striped:2:x:causal", "mask block = 'x'"},
      {"striped:2:4:window:0", "mask window = 0: must be >= 1"},
      {"striped:2:4:", "mask = ''"},
      {"striped:2:4", "mask = 'striped:2:4'"},
  };
  for (const auto& [text, message] : cases) {
    EXPECT_NE(parse_error(text).find(message), std::string::npos) << text << " gave '" << parse_error(text) << "'";
  }
}

// The mask table is the one list of kinds: its examples parse to their own kind and round-trip, names
// are distinct and are what to_string starts with, and the parse error lists every kind's syntax.
TEST(MaskKinds, TheTableHasOneParsableRowPerKind) {
  const auto table = mask_kind_table();
  ASSERT_EQ(all_mask_kinds().size(), table.size());
  std::set<std::string_view> names;
  for (std::size_t i = 0; i < table.size(); ++i) {
    const auto& row = table[i];
    SCOPED_TRACE(std::string(row.name));
    EXPECT_EQ(all_mask_kinds()[i], row.kind);
    EXPECT_EQ(&mask_kind_info(row.kind), &row);
    EXPECT_TRUE(names.insert(row.name).second) << "two kinds share the name";
    const MaskSpec example = MaskSpec::parse(row.example);
    EXPECT_EQ(example.kind, row.kind);
    EXPECT_EQ(MaskSpec::parse(example.to_string()), example);
    EXPECT_EQ(example.to_string().substr(0, row.name.size()), row.name);
    EXPECT_EQ(std::string_view(row.syntax).substr(0, row.name.size()), row.name);
    EXPECT_NE(parse_error("nonsense").find(row.syntax), std::string::npos);
    EXPECT_GT(example.document_pairs(16), 0);  // the example shows something on a 16-token document
  }
}

}  // namespace
}  // namespace fulcrum

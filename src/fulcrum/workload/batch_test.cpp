#include "fulcrum/workload/batch.hpp"

#include "fulcrum/core/error.hpp"
#include "fulcrum/core/random.hpp"

#include <gtest/gtest.h>

namespace fulcrum {
namespace {

std::vector<Document> docs_of(std::vector<Tokens> lengths) {
  std::vector<Document> docs;
  for (std::size_t i = 0; i < lengths.size(); ++i) docs.push_back({static_cast<std::int64_t>(i), lengths[i], {}});
  return docs;
}

TEST(PackBatch, SplitsAnOverflowingDocumentAcrossRanks) {
  const auto batch = pack_batch(docs_of({6, 3, 9}), 3, 6);
  ASSERT_EQ(batch.documents.size(), 3u);
  EXPECT_EQ(batch.documents[2].length, 9);
  const std::vector<Segment> expected = {{0, {0, 6}, 0}, {1, {0, 3}, 1}, {2, {0, 3}, 1}, {2, {3, 9}, 2}};
  ASSERT_EQ(batch.segments.size(), expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(batch.segments[i].doc, expected[i].doc);
    EXPECT_EQ(batch.segments[i].tokens, expected[i].tokens);
    EXPECT_EQ(batch.segments[i].rank, expected[i].rank);
  }
}

TEST(PackBatch, CutsTheLastDocumentAtTheBatchEnd) {
  const auto batch = pack_batch(docs_of({5, 20, 4}), 2, 8);
  ASSERT_EQ(batch.documents.size(), 2u);
  EXPECT_EQ(batch.documents[1].length, 11);
  EXPECT_EQ(batch.total_tokens(), 16);
}

TEST(PackBatch, RejectsBadShapesAndLengths) {
  EXPECT_THROW(pack_batch(docs_of({4}), 0, 8), Error);
  EXPECT_THROW(pack_batch(docs_of({4}), 2, 0), Error);
  EXPECT_THROW(pack_batch(docs_of({0}), 2, 8), Error);
  EXPECT_THROW(pack_batch(docs_of({-3}), 2, 8), Error);
}

TEST(BatchStream, EveryRankGetsExactlyItsBudgetAndRemaindersCarryOver) {
  Rng rng(2);
  BatchStream stream([&] { return rng.uniform_int(1, 50); }, 4, 32);
  Tokens produced = 0;
  for (int b = 0; b < 50; ++b) {
    const auto batch = stream.next();
    std::vector<Tokens> per_rank(4, 0);
    for (const auto& s : batch.segments) per_rank[s.rank] += s.tokens.size();
    for (Tokens t : per_rank) EXPECT_EQ(t, 32);
    produced += batch.total_tokens();
    for (std::size_t d = 0; d < batch.documents.size(); ++d) {
      Tokens covered = 0;
      for (const auto& s : batch.segments_of(static_cast<int>(d))) {
        EXPECT_EQ(s.tokens.begin, covered);
        covered = s.tokens.end;
      }
      EXPECT_EQ(covered, batch.documents[d].length);
    }
  }
  EXPECT_EQ(produced, 50 * 4 * 32);
}

}  // namespace
}  // namespace fulcrum

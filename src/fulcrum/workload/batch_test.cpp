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

// Nothing is dropped: documents that do not fit are an error naming the first one that would be cut.
TEST(PackBatch, RejectsDocumentsThatDoNotFit) {
  try {
    pack_batch(docs_of({5, 20, 4}), 2, 8);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kBadInput);
    EXPECT_NE(std::string(e.what()).find("document 1 would be cut at token 11"), std::string::npos) << e.what();
  }
  EXPECT_EQ(pack_batch(docs_of({5, 11}), 2, 8).total_tokens(), 16) << "exactly full fits";
}

TEST(BatchFromRankLayout, KeepsTheLoadersLayoutExactly) {
  const Batch b = batch_from_rank_layout({{3, 5}, {}, {8}}, 0, MaskSpec::causal(), 10);
  EXPECT_EQ(b.ranks, 3);
  EXPECT_EQ(b.tokens_per_rank, 8) << "the largest rank's total";
  ASSERT_EQ(b.documents.size(), 3u);
  EXPECT_EQ(b.documents[2].id, 12);
  ASSERT_EQ(b.segments.size(), 3u);
  EXPECT_EQ(b.segments[1].rank, 0);
  EXPECT_EQ(b.segments[2].rank, 2);
  EXPECT_EQ(b.segments[2].tokens, (Range{0, 8}));
  EXPECT_EQ(batch_from_rank_layout({{4}, {4}}, 16, MaskSpec::causal()).tokens_per_rank, 16);
}

TEST(BatchFromRankLayout, RejectsWhatDoesNotFitNamingTheField) {
  auto message = [](const std::vector<std::vector<Tokens>>& lengths, Tokens tokens_per_rank) {
    try {
      batch_from_rank_layout(lengths, tokens_per_rank, MaskSpec::causal());
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kBadInput);
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message({{3, 0}}, 0).find("lengths[0][1] = 0"), std::string::npos);
  EXPECT_NE(message({{3}, {6, 4}}, 8).find("lengths[1]: rank 1 holds 10 tokens"), std::string::npos);
  EXPECT_NE(message({}, 0).find("lengths: no ranks"), std::string::npos);
  EXPECT_NE(message({{}, {}}, 0).find("every rank is empty"), std::string::npos);
  EXPECT_NE(message({{2}}, -1).find("tokens_per_rank = -1"), std::string::npos);
  try {
    batch_from_rank_layout({{8, 6}}, 0, MaskSpec::striped(MaskSpec::causal(), 2, 2));
    ADD_FAILURE() << "a striped mask took a 6-token document";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("lengths[0][1]: mask striped = 'striped:2:2:causal': document length = 6 "
                                         "must be a multiple of ranks x block = 2 x 2 = 4"),
              std::string::npos)
        << e.what();
  }
}

TEST(PackBatch, RejectsBadShapesAndLengths) {
  EXPECT_THROW(pack_batch(docs_of({4}), 0, 8), Error);
  EXPECT_THROW(pack_batch(docs_of({4}), 2, 0), Error);
  EXPECT_THROW(pack_batch(docs_of({0}), 2, 8), Error);
  EXPECT_THROW(pack_batch(docs_of({-3}), 2, 8), Error);
  const MaskSpec striped = MaskSpec::striped(MaskSpec::causal(), 4, 1);
  EXPECT_NO_THROW(pack_batch({{0, 8, striped}}, 2, 8));
  EXPECT_THROW(pack_batch({{0, 6, striped}}, 2, 8), Error);
  EXPECT_THROW(
      pack_batch({{0, 8, MaskSpec::causal(), {MaskSpec::causal(), striped, MaskSpec::striped(striped, 3, 1)}}}, 2, 8),
      Error);  // a head's mask needs a multiple of 12
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

TEST(PackBatch, HeadTailGivesEachRankOfACrossingDocumentAHeadAndATailPieceAndKeepsItsTokens) {
  // One 640-token document over ranks of 256: pieces 256, 256, 128 become heads 128, 128, 64 from the
  // start and tails 128, 128, 64 from the end, in rank order.
  const auto batch = pack_batch(docs_of({640, 128}), 3, 256, BoundarySplit::kHeadTail);
  const std::vector<Segment> want = {{0, {0, 128}, 0},   {0, {128, 256}, 1}, {0, {256, 320}, 2}, {0, {320, 384}, 2},
                                     {0, {384, 512}, 1}, {0, {512, 640}, 0}, {1, {0, 128}, 2}};
  ASSERT_EQ(batch.segments.size(), want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(batch.segments[i].doc, want[i].doc) << i;
    EXPECT_EQ(batch.segments[i].tokens, want[i].tokens) << i;
    EXPECT_EQ(batch.segments[i].rank, want[i].rank) << i;
  }
  EXPECT_EQ(parse_boundary_split("head-tail"), BoundarySplit::kHeadTail);
  EXPECT_EQ(parse_boundary_split("contiguous"), BoundarySplit::kContiguous);
  EXPECT_STREQ(to_string(BoundarySplit::kHeadTail), "head-tail");
  try {
    parse_boundary_split("zigzag");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("boundary-split = 'zigzag': must be contiguous or head-tail"),
              std::string::npos)
        << e.what();
  }
}

TEST(BatchStream, HeadTailBatchesTileEveryDocumentAndKeepEveryRanksBudget) {
  for (const auto split : {BoundarySplit::kContiguous, BoundarySplit::kHeadTail}) {
    Rng rng(3);
    BatchStream stream([&] { return rng.uniform_int(1, 700); }, 4, 256, MaskSpec::causal(), split);
    for (int b = 0; b < 50; ++b) {
      const auto batch = stream.next();
      std::vector<Tokens> per_rank(4, 0);
      for (const auto& s : batch.segments) per_rank[s.rank] += s.tokens.size();
      for (Tokens t : per_rank) EXPECT_EQ(t, 256);
      for (std::size_t d = 0; d < batch.documents.size(); ++d) {
        Tokens covered = 0;
        for (const auto& s : batch.segments_of(static_cast<int>(d))) {
          EXPECT_EQ(s.tokens.begin, covered);  // sorted, disjoint, no gap
          EXPECT_GT(s.tokens.size(), 0);
          covered = s.tokens.end;
        }
        EXPECT_EQ(covered, batch.documents[d].length);
      }
    }
  }
}

}  // namespace
}  // namespace fulcrum

namespace fulcrum {
namespace {

// Planners place a document's work over planning_mask: it must hold every head's visible keys.
TEST(Document, PlanningMaskHoldsEveryHeadsKeys) {
  Document doc{0, 100, MaskSpec::causal(), {}};
  auto holds_every_head = [&] {
    for (Tokens q = 0; q < doc.length; q += 7) {
      const auto hull = doc.planning_mask().keys_needed({q, q + 1}, {0, doc.length}, doc.length);
      for (const MaskSpec& head : doc.head_masks) {
        for (const auto& k : head.keys_needed({q, q + 1}, {0, doc.length}, doc.length)) {
          Tokens covered = 0;
          for (const auto& h : hull)
            covered += std::max<Tokens>(0, std::min(h.end, k.end) - std::max(h.begin, k.begin));
          EXPECT_EQ(covered, k.size()) << "row " << q << " under " << head.to_string();
        }
      }
    }
  };
  EXPECT_EQ(&doc.planning_mask(), &doc.mask);
  doc.head_masks = {MaskSpec::sliding_window(8), MaskSpec::lambda(2, 4), MaskSpec::causal()};
  EXPECT_EQ(&doc.planning_mask(), &doc.mask) << "the causal hull holds heads that see only earlier keys";
  holds_every_head();
  doc.head_masks[1] = MaskSpec::full();
  EXPECT_EQ(doc.planning_mask(), MaskSpec::full()) << "a full head sees keys after its row";
  holds_every_head();
  doc.mask = MaskSpec::sliding_window(8);
  doc.head_masks[1] = MaskSpec::causal();
  EXPECT_EQ(doc.planning_mask(), MaskSpec::causal()) << "a window's hull does not hold a causal head";
  holds_every_head();
  doc.mask = MaskSpec::full();
  doc.head_masks[1] = MaskSpec::full();
  EXPECT_EQ(&doc.planning_mask(), &doc.mask);
  holds_every_head();
}

}  // namespace
}  // namespace fulcrum

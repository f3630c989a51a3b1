#include "fulcrum/workload/limits.hpp"

#include "fulcrum/core/error.hpp"
#include "fulcrum/workload/batch.hpp"
#include "fulcrum/workload/length_source.hpp"
#include "fulcrum/workload/mask.hpp"

#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <string>

namespace fulcrum {
namespace {

// `call` is bad input whose message contains `needle`.
void expect_bad_input(const std::function<void()>& call, const std::string& needle) {
  try {
    call();
    ADD_FAILURE() << "no error; expected one containing: " << needle;
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kBadInput) << e.what();
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(Limits, BatchShapesUpToTheLimitsPassAndOneBeyondIsRejectedByName) {
  EXPECT_NO_THROW(validate_batch_shape(kMaxRanks, 1));
  EXPECT_NO_THROW(validate_batch_shape(1, kMaxTokensPerRank));
  EXPECT_NO_THROW(validate_batch_shape(kMaxRanks, kMaxBatchTokens / kMaxRanks));
  expect_bad_input([] { validate_batch_shape(kMaxRanks + 1, 1); }, "ranks = 65537: must be <= 65536");
  expect_bad_input([] { validate_batch_shape(1, kMaxTokensPerRank + 1); },
                   "tokens-per-rank = 1073741825: must be <= 1073741824");
  // 2^62 tokens per rank planned nothing and "verified" before: ranks x tokens-per-rank overflowed.
  expect_bad_input([] { validate_batch_shape(4, Tokens{1} << 62); }, "tokens-per-rank = 4611686018427387904");
  expect_bad_input([] { validate_batch_shape(kMaxRanks, kMaxBatchTokens / kMaxRanks + 1); },
                   "ranks x tokens-per-rank = 65536 x 1048577");
}

// A 2^32-token document's causal pair count, 2^32 (2^32 + 1) / 2, overflows 64-bit arithmetic on the way
// (n (n + 1) > 2^63): it was packed, planned and reported "valid" with a wrapped imbalance.
TEST(Limits, DocumentsLongerThanTheLimitAreRejectedWhereTheyEnter) {
  const Tokens too_long = Tokens{1} << 32;
  expect_bad_input(
      [&] {
        pack_batch({{7, too_long, MaskSpec::causal()}}, 4, kMaxTokensPerRank);
      },
      "document 7: document length = 4294967296: must be <= 1073741824");
  expect_bad_input([&] { batch_from_rank_layout({{kMaxDocumentTokens + 1}}, 0, MaskSpec::causal()); },
                   "lengths[0][0]: document length = 1073741825");
  expect_bad_input([&] { MaskSpec::causal().check_length(too_long, "doc_len"); }, "doc_len: document length");
  EXPECT_NO_THROW(MaskSpec::full().check_length(kMaxDocumentTokens));
  EXPECT_EQ(pack_batch({{0, kMaxDocumentTokens, MaskSpec::causal()}}, 4, kMaxDocumentTokens / 4).segments.size(), 4u);
}

// At the largest document every kind's pair count is exact in 64 bits; references from the closed forms.
TEST(Limits, PairCountsAtTheLargestDocumentAreExact) {
  const Tokens n = kMaxDocumentTokens;
  EXPECT_EQ(MaskSpec::full().document_pairs(n), n * n);
  EXPECT_EQ(MaskSpec::causal().document_pairs(n), n / 2 * (n + 1));
  const Tokens w = n / 4;  // rows q < w see q + 1 keys, the rest w
  EXPECT_EQ(MaskSpec::sliding_window(w).document_pairs(n), w / 2 * (w + 1) + (n - w) * w);
  // The second half of the rows against every key: rows q in [n/2, n) see q + 1 keys.
  const Tokens h = n / 2;
  EXPECT_EQ(MaskSpec::causal().count_pairs({h, n}, {0, n}, n), (h + 1 + n) * h / 2);
}

TEST(Limits, MaskSpecsNameNoOffsetBeyondTheLargestDocument) {
  EXPECT_NO_THROW(MaskSpec::parse("window:1073741824"));
  expect_bad_input([] { MaskSpec::parse("window:1073741825"); }, "mask window = 1073741825: must be in");
  expect_bad_input([] { MaskSpec::parse("lambda:9223372036854775807:4"); }, "mask sink");
  expect_bad_input([] { MaskSpec::parse("vslash:0:-2000000000"); }, "-2000000000");
}

TEST(Limits, LengthSourcesProduceNoDocumentBeyondTheLimit) {
  const std::string text = ::testing::TempDir() + "/limits_lengths.txt";
  std::ofstream(text) << "100\n1073741825\n";
  expect_bad_input([&] { make_length_source("file:" + text, 0, 4096); },
                   "length #2 = 1073741825: must be <= 1073741824");
  const std::string json = ::testing::TempDir() + "/limits_lengths.json";
  std::ofstream(json) << "[100, 1073741825]";
  expect_bad_input([&] { make_length_source("file:" + json, 0, 4096); },
                   "lengths[1] = 1073741825: must be <= 1073741824");
  std::ofstream(json) << "[1e30]";  // a float, and beyond 64 bits: once reported as a negative length
  expect_bad_input([&] { make_length_source("file:" + json, 0, 4096); }, "lengths[0] = 1e+30: must be an integer");
  std::ofstream(json) << "[1.5, 2.7, 100]";
  expect_bad_input([&] { make_length_source("file:" + json, 0, 4096); }, "lengths[0] = 1.5: must be an integer");
  expect_bad_input([] { make_length_source("uniform:1:1073741825", 0, 4096); }, "MAX <= 1073741824");
  // prolong's longest document (340,149 tokens) elongated by 2^28 / 2^16 is over 2^30.
  expect_bad_input([] { make_length_source("prolong", 0, Tokens{1} << 28); },
                   "dataset = 'prolong' with tokens-per-rank = 268435456");
  EXPECT_NO_THROW(make_length_source("pretrain", 0, Tokens{1} << 20));
  // exp(29) is about 3.9e12 tokens: the distribution's tail is cut at the limit, as it is cut at 1.
  EXPECT_EQ(make_length_source("lognormal:29:0", 0, 4096)->next(), kMaxDocumentTokens);
}

}  // namespace
}  // namespace fulcrum

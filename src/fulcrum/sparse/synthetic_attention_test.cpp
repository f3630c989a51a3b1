#include "fulcrum/sparse/synthetic_attention.hpp"

#include "fulcrum/core/error.hpp"
#include "fulcrum/sparse/estimator.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

namespace fulcrum::sparse {
namespace {

using T = SyntheticTensor;

TEST(SyntheticAttention, RowsDependOnlyOnTheirCoordinates) {
  const SyntheticAttention data(3, 4, 2, 16, 1000);
  for (const T t : {T::kQ, T::kK, T::kV, T::kDO}) {
    const auto whole = data.rows(t, {0, 300});
    const auto part = data.rows(t, {100, 200});  // what a rank holding [100, 200) generates
    const auto width = static_cast<std::ptrdiff_t>(data.heads(t) * 16);
    EXPECT_TRUE(std::equal(part.begin(), part.end(), whole.begin() + 100 * width));
    std::vector<float> one(16);
    data.row(t, 150, data.heads(t) - 1, one);
    EXPECT_TRUE(std::equal(one.begin(), one.end(), whole.begin() + 151 * width - 16));
  }
  // K is the kv head's, whatever the number of q heads reading it.
  const SyntheticAttention wider(3, 8, 2, 16, 1000);
  EXPECT_EQ(wider.rows(T::kK, {0, 50}), data.rows(T::kK, {0, 50}));
}

double logit(const SyntheticAttention& data, int q_head, Tokens m, Tokens n) {
  const auto d = static_cast<std::size_t>(data.head_dim());
  std::vector<float> q(d), k(d);
  data.row(T::kQ, m, q_head, q);
  data.row(T::kK, n, q_head / (data.q_heads() / data.kv_heads()), k);
  double dot = 0.0;
  for (std::size_t e = 0; e < d; ++e) dot += static_cast<double>(q[e]) * k[e];
  return dot / std::sqrt(static_cast<double>(d));
}

TEST(SyntheticAttention, LogitsHaveThePlantedSlashesAndVerticals) {
  const SyntheticAttention data(9, 4, 2, 64, 8192);
  for (int h = 0; h < 4; ++h) {
    const auto& p = data.pattern(h);
    ASSERT_GE(p.slash_offsets.size(), 2u);
    EXPECT_EQ(p.slash_offsets[0], 0);
    EXPECT_EQ(p.slash_offsets[1], p.period);
    const Tokens m = 8191;
    // On a slash the periodic pairs add up (slash_logit); half a period away they cancel.
    EXPECT_GT(logit(data, h, m, m - p.period) - logit(data, h, m, m - p.period / 2), 0.8 * p.slash_logit) << h;
    EXPECT_GT(logit(data, h, m, m), p.slash_logit + 0.8 * p.band_logit) << h;
    // A heavy token's logit is vertical_logit x its weight from every query (the K noise moves it by
    // about 0.5 at most).
    for (std::size_t i = 0; i < p.vertical_tokens.size(); ++i) {
      const Tokens n = p.vertical_tokens[i];
      for (const Tokens query : {n, m, (n + m) / 2}) {
        EXPECT_NEAR(logit(data, h, query, n), p.vertical_logit * p.vertical_weights[i], 1.0) << h << " " << n;
      }
    }
    EXPECT_EQ(p.vertical_tokens.front(), 0);
    EXPECT_EQ(p.vertical_tokens.size(), 5u);
  }
}

TEST(SyntheticAttention, PatternsDifferAcrossHeadsAndSamplesAndGroupsShareTheirs) {
  const SyntheticAttention a(1, 4, 2, 64, 8192), b(2, 4, 2, 64, 8192);
  // GQA: q heads 0 and 1 read kv head 0: same slashes and verticals, their own strengths.
  EXPECT_EQ(a.pattern(0).period, a.pattern(1).period);
  EXPECT_EQ(a.pattern(0).vertical_tokens, a.pattern(1).vertical_tokens);
  EXPECT_NE(a.pattern(0).vertical_logit, a.pattern(1).vertical_logit);
  // Another kv head, another pattern; another sample, another pattern.
  EXPECT_NE(a.pattern(0).vertical_tokens, a.pattern(2).vertical_tokens);
  EXPECT_NE(a.pattern(0).period, a.pattern(2).period);
  for (int h = 0; h < 4; ++h) {
    EXPECT_NE(a.pattern(h).vertical_tokens, b.pattern(h).vertical_tokens) << h;
    EXPECT_NE(a.pattern(h).period, b.pattern(h).period) << h;
    EXPECT_GE(a.pattern(h).period, 8192 / 6);
    EXPECT_LE(a.pattern(h).period, 8192 * 2 / 5 + 1);
  }
}

TEST(SyntheticAttention, BadInputNamesTheField) {
  const auto expect_bad = [](auto make, const std::string& text) {
    try {
      make();
      ADD_FAILURE() << "no error; expected '" << text << "'";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kBadInput);
      EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
    }
  };
  expect_bad([] { SyntheticAttention(1, 3, 2, 16, 100); }, "q_heads = 3: must be a multiple of kv_heads (2)");
  expect_bad([] { SyntheticAttention(1, 2, 2, 7, 100); }, "head_dim = 7: must be even and >= 6");
  expect_bad([] { SyntheticAttention(1, 2, 2, 16, 1); }, "doc_len = 1: must be >= 2");
  SyntheticOptions o;
  o.max_period = 0.1;
  expect_bad([&] { SyntheticAttention(1, 2, 2, 16, 100, o); }, "max_period = 0.1: must be in [min_period");
  o = {};
  o.noise = -1;
  expect_bad([&] { SyntheticAttention(1, 2, 2, 16, 100, o); }, "noise = -1");
  const SyntheticAttention data(1, 2, 2, 16, 100);
  expect_bad([&] { (void)data.rows(T::kQ, {90, 101}); }, "positions = [90, 101): must lie in [0, 100]");
}

// The estimator on the synthetic data: what each side of the pair promises of the other.
struct SyntheticRun {
  VerticalSlashEstimate estimate;
  Tokens doc_len;
};

SyntheticRun estimate_synthetic(const SyntheticAttention& data, const VerticalSlashOptions& o) {
  const Tokens n = data.doc_len();
  const auto q = data.rows(T::kQ, {n - o.window, n});
  const auto k = data.rows(T::kK, {0, n});
  std::vector<Tokens> positions(static_cast<std::size_t>(n));
  for (Tokens p = 0; p < n; ++p) positions[static_cast<std::size_t>(p)] = p;
  return {estimate_vertical_slash({data.q_heads(), data.kv_heads(), data.head_dim()}, n, q, {k, positions}, o), n};
}

TEST(SyntheticAttention, EstimatorKeepsGammaAndFindsThePlantedPattern) {
  for (const std::uint64_t seed : {1, 2, 3}) {
    const SyntheticAttention data(seed, 4, 2, 64, 8192);
    for (const double gamma : {0.9, 0.95}) {
      const VerticalSlashOptions o{gamma, 64, 4096, 64};
      const auto run = estimate_synthetic(data, o);
      for (int h = 0; h < 4; ++h) {
        SCOPED_TRACE(::testing::Message() << "seed " << seed << " gamma " << gamma << " head " << h);
        const auto& index = run.estimate.heads[static_cast<std::size_t>(h)];
        const auto& slash = run.estimate.scores[static_cast<std::size_t>(h)].slash;
        const auto& p = data.pattern(h);
        // Recall: the masses are rounded down to 2^-50 each, so up to 1e-9 may be missing from gamma.
        EXPECT_GE(index.recall, gamma - 1e-9);
        // Every heavy token is a selected vertical.
        for (const Tokens t : p.vertical_tokens) {
          EXPECT_TRUE(std::binary_search(index.verticals.begin(), index.verticals.end(), t)) << "heavy token " << t;
        }
        // Every planted slash whose lobe (the offsets around it whose periodic pairs are within a
        // logit of their peak) holds more than 1 - gamma of the mass must have been selected; the
        // lobe's peak is its top score, so its block diagonal is active.
        const Tokens half_width = std::max<Tokens>(1, p.period / 128);
        int checked = 0;
        for (const Tokens d : p.slash_offsets) {
          double lobe = 0.0;
          for (Tokens x = std::max<Tokens>(0, d - half_width); x <= std::min(run.doc_len - 1, d + half_width); ++x) {
            lobe += slash[static_cast<std::size_t>(x)];
          }
          if (lobe <= 1.0 - gamma) continue;
          ++checked;
          const bool active = std::binary_search(index.block_offsets.begin(), index.block_offsets.end(), d / 64) ||
                              std::binary_search(index.block_offsets.begin(), index.block_offsets.end(), (d + 63) / 64);
          EXPECT_TRUE(active) << "slash " << d << " lobe mass " << lobe;
        }
        EXPECT_GE(checked, 1);  // at least the local band
        const double sparsity = 1.0 - kept_pair_fraction(index, run.doc_len);
        EXPECT_GT(sparsity, 0.8);
        EXPECT_LT(sparsity, 0.995);
      }
    }
  }
}

}  // namespace
}  // namespace fulcrum::sparse

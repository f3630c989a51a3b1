#include "fulcrum/sparse/estimator.hpp"

#include "fulcrum/core/error.hpp"
#include "fulcrum/core/random.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <barrier>
#include <cmath>
#include <numeric>
#include <thread>

namespace fulcrum::sparse {
namespace {

// Random inputs: normal Q and K (Q scaled up so that rows are peaked rather than uniform), every key.
struct Inputs {
  EstimatorShape shape;
  Tokens doc_len = 0;
  std::vector<float> q_obs, k;
  std::vector<Tokens> positions;
};

Inputs random_inputs(std::uint64_t seed, EstimatorShape shape, Tokens doc_len, Tokens window, double q_scale) {
  Rng rng(seed);
  Inputs in{shape, doc_len, {}, {}, {}};
  for (Tokens i = 0; i < window * shape.q_heads * shape.head_dim; ++i) {
    in.q_obs.push_back(static_cast<float>(q_scale * rng.normal()));
  }
  for (Tokens i = 0; i < doc_len * shape.kv_heads * shape.head_dim; ++i)
    in.k.push_back(static_cast<float>(rng.normal()));
  in.positions.resize(static_cast<std::size_t>(doc_len));
  std::iota(in.positions.begin(), in.positions.end(), Tokens{0});
  return in;
}

// The fp64 brute force, written from the definition with nothing shared with the implementation: a
// dense softmax per observation row, explicit sums, sorting, the cumulative budget and the mask.
struct Reference {
  std::vector<VerticalSlashScores> scores;
  std::vector<VerticalSlashIndex> heads;
};

std::vector<Tokens> reference_select(const std::vector<double>& s, double gamma, Tokens cap) {
  std::vector<std::pair<double, Tokens>> order;
  for (std::size_t i = 0; i < s.size(); ++i) order.emplace_back(-s[i], static_cast<Tokens>(i));
  std::sort(order.begin(), order.end());
  const double total = std::accumulate(s.begin(), s.end(), 0.0);
  std::vector<Tokens> kept = {0};
  double sum = 0.0;
  for (std::size_t i = 0; i < order.size() && static_cast<Tokens>(i) < cap && sum < gamma * total; ++i) {
    sum -= order[i].first;
    kept.push_back(order[i].second);
  }
  std::sort(kept.begin(), kept.end());
  kept.erase(std::unique(kept.begin(), kept.end()), kept.end());
  return kept;
}

Reference reference(const Inputs& in, const VerticalSlashOptions& o) {
  const auto& s = in.shape;
  const Tokens n = in.doc_len, w = o.window, g = o.block, first = n - w;
  const Tokens cap = o.cap / g * g;
  Reference out;
  for (int h = 0; h < s.q_heads; ++h) {
    const int kv = h / (s.q_heads / s.kv_heads);
    std::vector<std::vector<double>> a(static_cast<std::size_t>(w), std::vector<double>(static_cast<std::size_t>(n)));
    for (Tokens i = 0; i < w; ++i) {
      auto& row = a[static_cast<std::size_t>(i)];
      double max = -INFINITY;
      for (Tokens k = 0; k <= first + i; ++k) {
        double dot = 0.0;
        for (int e = 0; e < s.head_dim; ++e) {
          dot += static_cast<double>(in.q_obs[static_cast<std::size_t>((i * s.q_heads + h) * s.head_dim + e)]) *
                 in.k[static_cast<std::size_t>((k * s.kv_heads + kv) * s.head_dim + e)];
        }
        row[static_cast<std::size_t>(k)] = dot / std::sqrt(static_cast<double>(s.head_dim));
        max = std::max(max, row[static_cast<std::size_t>(k)]);
      }
      double sum = 0.0;
      for (Tokens k = 0; k < n; ++k) {
        auto& x = row[static_cast<std::size_t>(k)];
        x = k <= first + i ? std::exp(x - max) : 0.0;
        sum += x;
      }
      for (auto& x : row) x /= sum * static_cast<double>(w);
    }
    VerticalSlashScores sc{std::vector<double>(static_cast<std::size_t>(n)),
                           std::vector<double>(static_cast<std::size_t>(n))};
    for (Tokens i = 0; i < w; ++i) {
      for (Tokens k = 0; k < n; ++k) {
        sc.vertical[static_cast<std::size_t>(k)] += a[static_cast<std::size_t>(i)][static_cast<std::size_t>(k)];
        if (k <= first + i)
          sc.slash[static_cast<std::size_t>(first + i - k)] +=
              a[static_cast<std::size_t>(i)][static_cast<std::size_t>(k)];
      }
    }
    VerticalSlashIndex index;
    index.block = g;
    index.verticals = reference_select(sc.vertical, o.gamma, cap);
    for (const Tokens d : reference_select(sc.slash, o.gamma, cap)) {
      index.block_offsets.push_back(d / g);
      index.block_offsets.push_back((d + g - 1) / g);
    }
    std::sort(index.block_offsets.begin(), index.block_offsets.end());
    index.block_offsets.erase(std::unique(index.block_offsets.begin(), index.block_offsets.end()),
                              index.block_offsets.end());
    for (Tokens i = 0; i < w; ++i) {
      for (Tokens k = 0; k <= first + i; ++k) {
        const Tokens q = first + i;
        const bool diagonal = std::count(index.block_offsets.begin(), index.block_offsets.end(), q / g - k / g) > 0;
        const bool column = std::count(index.verticals.begin(), index.verticals.end(), k) > 0;
        if (diagonal || column) index.recall += a[static_cast<std::size_t>(i)][static_cast<std::size_t>(k)];
      }
    }
    out.scores.push_back(std::move(sc));
    out.heads.push_back(std::move(index));
  }
  return out;
}

VerticalSlashEstimate run_single(const Inputs& in, const VerticalSlashOptions& o) {
  return estimate_vertical_slash(in.shape, in.doc_len, in.q_obs, {in.k, in.positions}, o);
}

// Tolerances: the implementation's logits are fp32 sums (relative error about 1e-6) and its masses are
// rounded to 2^-50, so scores and recall (masses summing to 1) agree with fp64 to 1e-5.
constexpr double kMassTolerance = 1e-5;

TEST(Estimator, MatchesTheFp64BruteForce) {
  struct Case {
    EstimatorShape shape;
    Tokens doc_len;
    VerticalSlashOptions options;
    double q_scale;
  };
  const std::vector<Case> cases = {
      {{2, 1, 8}, 150, {0.9, 16, 64, 24}, 1.5},   {{4, 2, 16}, 300, {0.95, 32, 4096, 64}, 1.0},
      {{3, 3, 5}, 97, {0.5, 7, 14, 10}, 2.0},     {{2, 2, 32}, 256, {1.0, 64, 128, 64}, 0.7},
      {{1, 1, 12}, 64, {0.8, 1, 3, 64}, 2.0},      // the cap binds; window = whole document
      {{2, 1, 8}, 230, {0.9, 16, 256, 100}, 1.5},  // the largest window: rows in two blocks of 64
  };
  std::uint64_t seed = 11;
  for (const auto& c : cases) {
    const Inputs in = random_inputs(seed++, c.shape, c.doc_len, c.options.window, c.q_scale);
    const auto got = run_single(in, c.options);
    const auto want = reference(in, c.options);
    ASSERT_EQ(got.heads.size(), static_cast<std::size_t>(c.shape.q_heads));
    for (std::size_t h = 0; h < got.heads.size(); ++h) {
      SCOPED_TRACE(::testing::Message() << "doc_len " << c.doc_len << " head " << h);
      for (std::size_t t = 0; t < static_cast<std::size_t>(c.doc_len); ++t) {
        ASSERT_NEAR(got.scores[h].vertical[t], want.scores[h].vertical[t], kMassTolerance) << "vertical " << t;
        ASSERT_NEAR(got.scores[h].slash[t], want.scores[h].slash[t], kMassTolerance) << "slash " << t;
      }
      EXPECT_EQ(got.heads[h].verticals, want.heads[h].verticals);
      EXPECT_EQ(got.heads[h].block_offsets, want.heads[h].block_offsets);
      EXPECT_EQ(got.heads[h].block, c.options.block);
      EXPECT_NEAR(got.heads[h].recall, want.heads[h].recall, kMassTolerance);
      EXPECT_LE(static_cast<Tokens>(got.heads[h].verticals.size()), c.options.effective_cap() + 1);
    }
  }
}

// Pseudo-ranks as threads: each collective deposits its span, and after a barrier every rank combines
// all of them in rank order into its own copy; a second barrier keeps a rank from overwriting its span
// while a slower one still reads it.
class ThreadReduce final : public EstimatorReduce {
 public:
  struct Shared {
    explicit Shared(int ranks) : slots(static_cast<std::size_t>(ranks)), barrier(ranks) {}
    std::vector<void*> slots;
    std::barrier<> barrier;
  };
  ThreadReduce(Shared& shared, int rank) : shared_(shared), rank_(rank) {}
  void max(std::span<double> v) override {
    combine(v, [](double a, double b) { return std::max(a, b); });
  }
  void sum(std::span<double> v) override {
    combine(v, [](double a, double b) { return a + b; });
  }
  void broadcast_from_last(std::span<float> v) override {
    combine(v, [](float, float b) { return b; });
  }
  int calls = 0;

 private:
  template <class T, class Op>
  void combine(std::span<T> values, Op op) {
    ++calls;
    shared_.slots[static_cast<std::size_t>(rank_)] = values.data();
    shared_.barrier.arrive_and_wait();
    std::vector<T> result(values.size());
    for (std::size_t r = 0; r < shared_.slots.size(); ++r) {
      const T* other = static_cast<const T*>(shared_.slots[r]);
      for (std::size_t i = 0; i < values.size(); ++i) result[i] = r == 0 ? other[i] : op(result[i], other[i]);
    }
    shared_.barrier.arrive_and_wait();
    std::copy(result.begin(), result.end(), values.begin());
  }
  Shared& shared_;
  int rank_;
};

// Runs the estimator on `ranks` threads; rank r holds the keys whose position p has owner(p) == r, the
// last rank the observation rows.
template <class Owner>
std::vector<VerticalSlashEstimate> run_split(const Inputs& in, const VerticalSlashOptions& o, int ranks, Owner owner) {
  ThreadReduce::Shared shared(ranks);
  std::vector<VerticalSlashEstimate> out(static_cast<std::size_t>(ranks));
  std::vector<std::thread> threads;
  const auto width = static_cast<std::size_t>(in.shape.kv_heads * in.shape.head_dim);
  for (int r = 0; r < ranks; ++r) {
    threads.emplace_back([&, r] {
      std::vector<float> k;
      std::vector<Tokens> positions;
      for (Tokens p = 0; p < in.doc_len; ++p) {
        if (owner(p) != r) continue;
        positions.push_back(p);
        const auto at = in.k.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(p) * width);
        k.insert(k.end(), at, at + static_cast<std::ptrdiff_t>(width));
      }
      ThreadReduce reduce(shared, r);
      const std::span<const float> q = r == ranks - 1 ? std::span<const float>(in.q_obs) : std::span<const float>();
      out[static_cast<std::size_t>(r)] = estimate_vertical_slash(in.shape, in.doc_len, q, {k, positions}, o, reduce);
      EXPECT_EQ(reduce.calls, 5);
    });
  }
  for (auto& t : threads) t.join();
  return out;
}

void expect_identical(const VerticalSlashEstimate& got, const VerticalSlashEstimate& want) {
  ASSERT_EQ(got.heads.size(), want.heads.size());
  for (std::size_t h = 0; h < got.heads.size(); ++h) {
    EXPECT_EQ(got.heads[h], want.heads[h]) << "head " << h;  // recall included, bit for bit
    EXPECT_EQ(got.scores[h].vertical, want.scores[h].vertical) << "head " << h;
    EXPECT_EQ(got.scores[h].slash, want.scores[h].slash) << "head " << h;
  }
}

TEST(Estimator, SplitKeysGiveTheSingleProcessIndexExactly) {
  const VerticalSlashOptions options{0.9, 16, 256, 32};
  const Inputs in = random_inputs(5, {4, 2, 16}, 333, options.window, 1.5);
  const auto single = run_single(in, options);
  for (int ranks = 1; ranks <= 4; ++ranks) {
    SCOPED_TRACE(::testing::Message() << ranks << " ranks");
    const Tokens chunk = (in.doc_len + ranks - 1) / ranks;
    const auto contiguous = run_split(in, options, ranks, [&](Tokens p) { return static_cast<int>(p / chunk); });
    const auto striped = run_split(in, options, ranks, [&](Tokens p) { return static_cast<int>((p / 7) % ranks); });
    for (int r = 0; r < ranks; ++r) {
      expect_identical(contiguous[static_cast<std::size_t>(r)], single);
      expect_identical(striped[static_cast<std::size_t>(r)], single);
    }
  }
}

TEST(Estimator, KeysMissingOrTwiceAreRejected) {
  const VerticalSlashOptions options{0.9, 16, 256, 16};
  Inputs in = random_inputs(3, {2, 1, 8}, 100, options.window, 1.0);
  in.positions.pop_back();
  in.k.resize(in.k.size() - 8);
  EXPECT_THROW(
      {
        try {
          run_single(in, options);
        } catch (const Error& e) {
          EXPECT_NE(std::string(e.what()).find("keys: the ranks hold 99 key rows"), std::string::npos) << e.what();
          throw;
        }
      },
      Error);
}

void expect_bad_input(const std::function<void()>& call, const std::string& text) {
  try {
    call();
    ADD_FAILURE() << "no error; expected one containing '" << text << "'";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kBadInput) << e.what();
    EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
  }
}

TEST(Estimator, BadInputNamesTheField) {
  const Inputs in = random_inputs(3, {2, 1, 8}, 100, 16, 1.0);
  const auto with = [&](VerticalSlashOptions o) { return [&in, o] { run_single(in, o); }; };
  expect_bad_input(with({0.0, 16, 256, 16}), "gamma = 0: must be in (0, 1]");
  expect_bad_input(with({1.5, 16, 256, 16}), "gamma = 1.5: must be in (0, 1]");
  expect_bad_input(with({NAN, 16, 256, 16}), "gamma = nan");
  expect_bad_input(with({0.9, 0, 256, 16}), "block = 0: must be >= 1");
  expect_bad_input(with({0.9, 16, 8, 16}), "cap = 8: must be >= block (16)");
  expect_bad_input(with({0.9, 16, 256, 0}), "window = 0: must be in [1, 100]");
  expect_bad_input(with({0.9, 16, 256, 101}), "window = 101: must be in [1, 100]");
  expect_bad_input(
      [&] {
        estimate_vertical_slash({3, 2, 8}, 100, {}, {in.k, in.positions}, {});
      },
      "q_heads = 3: must be a multiple of kv_heads (2)");
  expect_bad_input([&] { estimate_vertical_slash({2, 1, 0}, 100, {}, {in.k, in.positions}, {}); }, "head_dim = 0");
  const std::vector<float> short_q(10);
  expect_bad_input(
      [&] {
        estimate_vertical_slash(in.shape, 100, short_q, {in.k, in.positions}, {0.9, 16, 256, 16});
      },
      "q_obs: 10 values, want 256");
  std::vector<Tokens> outside = in.positions;
  outside[3] = 100;
  expect_bad_input(
      [&] {
        estimate_vertical_slash(in.shape, 100, in.q_obs, {in.k, outside}, {0.9, 16, 256, 16});
      },
      "keys.positions: 100 is outside the document [0, 100)");
}

}  // namespace
}  // namespace fulcrum::sparse

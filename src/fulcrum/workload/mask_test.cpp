// Every mask kind against the oracle: the (q, k) matrix of `allows`, brute-forced per document length.
#include "fulcrum/workload/mask.hpp"

#include "fulcrum/core/random.hpp"
#include "fulcrum/workload/limits.hpp"
#include "fulcrum/workload/mask_test_cases.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <functional>
#include <limits>

namespace fulcrum {
namespace {

std::vector<MaskSpec> fixed_masks() {
  return testing::with_every_kind(
      {MaskSpec::causal(),
       MaskSpec::full(),
       MaskSpec::sliding_window(7),
       MaskSpec::sliding_window(1),
       MaskSpec::lambda(3, 5),
       MaskSpec::lambda(0, 4),
       MaskSpec::causal_blockwise(4, 1),
       MaskSpec::causal_blockwise(1, 0),
       MaskSpec::causal_blockwise(5, 0),
       MaskSpec::causal_blockwise(3, 2),
       MaskSpec::causal_blockwise(16, 3),
       MaskSpec::causal_blockwise(64, 1),
       MaskSpec::causal_blockwise(7, kMaxDocumentTokens),  // a window past the start
       MaskSpec::shared_question(3, 30),
       MaskSpec::shared_question(1, 50),
       MaskSpec::shared_question(7, 10),
       MaskSpec::shared_question(40, 99),
       MaskSpec::shared_question(2, 1),
       MaskSpec::vertical_slash({0, 5, 17, 100, 250}, {0, 1, 2, 9, 64}),
       MaskSpec::vertical_slash({}, {0}),
       MaskSpec::vertical_slash({3, 4}, {}),
       MaskSpec::vertical_slash({}, {}),
       MaskSpec::block_sparse(4, {{0, 0}, {1, 0}, {1, 1}, {2, 1}, {3, 0}, {3, 3}, {5, 2}, {7, 7}, {2, 5}}),
       MaskSpec::block_sparse(1, {{0, 0}, {1, 0}, {2, 2}, {9, 4}, {100, 99}}),
       MaskSpec::block_sparse(16, {{0, 0}, {1, 1}, {2, 0}, {2, 2}, {3, 1}, {4, 4}, {5, 0}, {5, 5}, {6, 6}}),
       MaskSpec::vertical_slash_blocks(4, {0, 5, 17, 100, 250}, {0, 1, 5}),
       MaskSpec::vertical_slash_blocks(1, {}, {0}),
       MaskSpec::vertical_slash_blocks(16, {3, 40}, {0, 2}),
       MaskSpec::vertical_slash_blocks(3, {2, 4}, {}),
       MaskSpec::vertical_slash_blocks(64, {}, {1}),
       MaskSpec::striped(MaskSpec::causal(), 4, 1),
       MaskSpec::striped(MaskSpec::vertical_slash_blocks(4, {0, 7}, {0, 1, 5}), 2, 4),
       MaskSpec::striped(MaskSpec::vertical_slash_blocks(2, {3}, {0, 3}), 3, 1),
       MaskSpec::striped(MaskSpec::sliding_window(9), 3, 2),
       MaskSpec::striped(MaskSpec::shared_question(3, 25), 2, 8),
       MaskSpec::striped(MaskSpec::full(), 1, 7),
       MaskSpec::striped(MaskSpec::striped(MaskSpec::causal(), 2, 2), 3, 1)});  // nested permutations
}

// A length >= len that `mask` accepts (striped masks need multiples of ranks x block).
Tokens fit_length(const MaskSpec& mask, Tokens len) {
  const Tokens m = mask.length_multiple();
  return (len + m - 1) / m * m;
}

// Index masks and striped masks drawn for a document of about len tokens: dense enough to hit every
// code path.
MaskSpec random_listed_mask(Rng& rng, Tokens len) {
  const double draw = rng.uniform();
  if (draw < 0.25) {
    std::vector<Tokens> v, d;
    const Tokens block = rng.uniform_int(1, 20);
    for (Tokens i = 0; i < len; ++i) {
      if (rng.uniform() < 0.05) v.push_back(i);
    }
    for (Tokens i = 0; i * block < len; ++i) {
      if (rng.uniform() < 0.2) d.push_back(i);
    }
    return MaskSpec::vertical_slash_blocks(block, v, d);
  }
  if (draw < 0.5) {
    const auto ranks = static_cast<int>(rng.uniform_int(1, 5));
    const Tokens block = rng.uniform() < 0.3 ? 1 : rng.uniform_int(1, 12);
    const MaskSpec inner = rng.uniform() < 0.2 ? MaskSpec::lambda(3, 7) : random_listed_mask(rng, len);
    return MaskSpec::striped(inner, ranks, block);
  }
  if (draw < 0.75) {
    std::vector<Tokens> v, s;
    for (Tokens i = 0; i < len; ++i) {
      if (rng.uniform() < 0.08) v.push_back(i);
      if (rng.uniform() < 0.08) s.push_back(i);
    }
    return MaskSpec::vertical_slash(v, s);
  }
  const Tokens block = rng.uniform_int(1, 24);
  std::vector<std::pair<Tokens, Tokens>> pairs;
  for (Tokens qb = 0; qb * block < len; ++qb) {
    for (Tokens kb = 0; kb <= qb + 1; ++kb) {
      if (rng.uniform() < 0.4) pairs.emplace_back(qb, kb);
    }
  }
  return MaskSpec::block_sparse(block, pairs);
}

// The allows matrix of one document, with 2-D prefix sums for O(1) rectangle counts.
struct Oracle {
  Tokens len;
  std::vector<char> allow;   // allow[q * len + k]
  std::vector<Tokens> sums;  // sums[q * (len + 1) + k]: pairs in [0, q) x [0, k)

  Oracle(const MaskSpec& mask, Tokens n)
      : len(n), allow(static_cast<std::size_t>(n * n)), sums(static_cast<std::size_t>((n + 1) * (n + 1)), 0) {
    for (Tokens q = 0; q < n; ++q) {
      for (Tokens k = 0; k < n; ++k) {
        allow[static_cast<std::size_t>(q * n + k)] = mask.allows(q, k, n) ? 1 : 0;
        sums[idx(q + 1, k + 1)] = sums[idx(q, k + 1)] + sums[idx(q + 1, k)] - sums[idx(q, k)] + (at(q, k) ? 1 : 0);
      }
    }
  }
  std::size_t idx(Tokens q, Tokens k) const { return static_cast<std::size_t>(q * (len + 1) + k); }
  bool at(Tokens q, Tokens k) const { return allow[static_cast<std::size_t>(q * len + k)] != 0; }
  Tokens count(Range q, Range k) const {
    q = intersect(q, {0, len});
    k = intersect(k, {0, len});
    if (q.empty() || k.empty()) return 0;
    return sums[idx(q.end, k.end)] - sums[idx(q.begin, k.end)] - sums[idx(q.end, k.begin)] +
           sums[idx(q.begin, k.begin)];
  }
};

std::string describe(const MaskSpec& mask, Tokens len) { return mask.to_string() + " len=" + std::to_string(len); }

// Runs `check` on every fixed mask and on random index masks, each over random document lengths.
void for_each_case(std::uint64_t seed, const std::function<void(const MaskSpec&, const Oracle&, Rng&)>& check) {
  Rng rng(seed);
  auto lengths = [&] {
    std::vector<Tokens> out = {1, 2, static_cast<Tokens>(rng.uniform_int(3, 20))};
    for (int i = 0; i < 4; ++i) out.push_back(rng.uniform_int(1, 300));
    return out;
  };
  for (const auto& mask : fixed_masks()) {
    for (Tokens len : lengths()) check(mask, Oracle(mask, fit_length(mask, len)), rng);
  }
  for (int i = 0; i < 40; ++i) {
    const auto mask = random_listed_mask(rng, rng.uniform_int(1, 300));
    check(mask, Oracle(mask, fit_length(mask, rng.uniform_int(1, 300))), rng);
  }
}

Range random_range(Rng& rng, Tokens len) {
  Range r{rng.uniform_int(-2, len + 2), 0};
  r.end = rng.uniform_int(r.begin, len + 3);
  return r;
}

// fmt, not string +: GCC 12 at -O3 reports a false -Wrestrict on the concatenation.
std::string show(Range r) { return fmt::format("[{},{})", r.begin, r.end); }

TEST(MaskSpec, PairCountsEqualBruteForceOverAllows) {
  for_each_case(5, [](const MaskSpec& mask, const Oracle& o, Rng& rng) {
    ASSERT_EQ(mask.document_pairs(o.len), o.count({0, o.len}, {0, o.len})) << describe(mask, o.len);
    for (int trial = 0; trial < 200; ++trial) {
      const Range q = random_range(rng, o.len), k = random_range(rng, o.len);
      ASSERT_EQ(mask.count_pairs(q, k, o.len), o.count(q, k))
          << describe(mask, o.len) << " q=" << show(q) << " k=" << show(k);
    }
  });
}

TEST(MaskSpec, VisibleEqualsAllowsRowByRowOrIsTheHull) {
  for_each_case(6, [](const MaskSpec& mask, const Oracle& o, Rng&) {
    for (Tokens q = 0; q < o.len; ++q) {
      const auto visible = mask.visible(q, o.len);
      ASSERT_LE(visible.size(), 2) << describe(mask, o.len) << " q=" << q;
      for (int i = 1; i < visible.size(); ++i) ASSERT_LT(visible[i - 1].end, visible[i].begin) << describe(mask, o.len);
      if (mask.plans_over_hull()) {
        const SmallRanges hull = mask.is_index_list() ? SmallRanges{{0, q + 1}} : SmallRanges{{0, o.len}};
        ASSERT_EQ(visible, hull) << describe(mask, o.len) << " q=" << q;
        for (Tokens k = 0; k < o.len; ++k) {  // the hull holds every visible pair
          if (o.at(q, k)) {
            ASSERT_TRUE(hull[0].contains(k)) << describe(mask, o.len) << " q=" << q << " k=" << k;
          }
        }
        continue;
      }
      for (Tokens k = 0; k < o.len; ++k) {
        bool in = false;
        for (const auto& r : visible) in = in || r.contains(k);
        ASSERT_EQ(in, o.at(q, k)) << describe(mask, o.len) << " q=" << q << " k=" << k;
      }
    }
  });
}

TEST(MaskSpec, RowBitsEqualAllowsBitByBit) {
  for_each_case(7, [](const MaskSpec& mask, const Oracle& o, Rng& rng) {
    for (int trial = 0; trial < 300; ++trial) {
      const Tokens q = rng.uniform_int(0, o.len - 1);
      const int width = static_cast<int>(trial % 4 == 0 ? 64 : rng.uniform_int(1, 64));
      const Tokens key_begin =
          trial % 3 == 0 ? 64 * rng.uniform_int(0, o.len / 64 + 1) : rng.uniform_int(-70, o.len + 4);
      const std::uint64_t bits = mask.row_bits(q, key_begin, width, o.len);
      for (int j = 0; j < 64; ++j) {
        const Tokens k = key_begin + j;
        const bool expected = j < width && k >= 0 && k < o.len && o.at(q, k);
        ASSERT_EQ(((bits >> j) & 1) != 0, expected)
            << describe(mask, o.len) << " q=" << q << " key_begin=" << key_begin << " width=" << width << " j=" << j;
      }
    }
  });
}

TEST(MaskSpec, ClassifyAgreesWithBruteForce) {
  for_each_case(8, [](const MaskSpec& mask, const Oracle& o, Rng& rng) {
    for (int trial = 0; trial < 200; ++trial) {
      // Kernel-shaped tiles half the time, arbitrary rectangles otherwise.
      Range q = random_range(rng, o.len), k = random_range(rng, o.len);
      if (trial % 2 == 0) {
        const Tokens tile = trial % 4 == 0 ? 64 : 16;
        q.begin = tile * rng.uniform_int(0, o.len / tile);
        k.begin = tile * rng.uniform_int(0, o.len / tile);
        q.end = q.begin + tile;
        k.end = k.begin + tile;
      }
      const Tokens pairs = o.count(q, k);
      const Tokens area = intersect(q, {0, o.len}).size() * intersect(k, {0, o.len}).size();
      const TileKind expected = pairs == 0 ? TileKind::kEmpty : pairs == area ? TileKind::kFull : TileKind::kPartial;
      ASSERT_EQ(mask.classify(q, k, o.len), expected) << describe(mask, o.len) << " q=" << show(q) << " k=" << show(k);
    }
  });
}

TEST(MaskSpec, KeysNeededIsExactlyTheUnionOfVisibleKeys) {
  for_each_case(9, [](const MaskSpec& mask, const Oracle& o, Rng& rng) {
    for (int trial = 0; trial < 100; ++trial) {
      Range q{rng.uniform_int(0, o.len - 1), 0}, k{rng.uniform_int(0, o.len - 1), 0};
      q.end = rng.uniform_int(q.begin + 1, o.len);
      k.end = rng.uniform_int(k.begin + 1, o.len);
      RangeSet union_of_visible;
      for (Tokens row = q.begin; row < q.end; ++row) {
        for (const auto& r : mask.visible(row, o.len)) union_of_visible.add(intersect(r, k));
      }
      const auto needed = mask.keys_needed(q, k, o.len);
      ASSERT_EQ(needed.to_vector(), union_of_visible.ranges())
          << describe(mask, o.len) << " q=" << show(q) << " k=" << show(k);
      if (mask.plans_over_hull()) continue;
      RangeSet union_of_allowed;  // band masks: also straight from the definition
      for (Tokens row = q.begin; row < q.end; ++row) {
        for (Tokens key = k.begin; key < k.end; ++key) {
          if (o.at(row, key)) union_of_allowed.add({key, key + 1});
        }
      }
      ASSERT_EQ(needed.to_vector(), union_of_allowed.ranges()) << describe(mask, o.len);
    }
  });
}

// What the kernels' gathered columns rely on: rest ∪ {(q, c) : source(c) <= source(q)} is the mask,
// the columns are distinct slots in ascending original position, and only vertical-slash kinds (also
// striped) have any.
TEST(MaskSpec, SplitColumnsRecomposesTheMask) {
  int with_columns = 0;
  for_each_case(11, [&](const MaskSpec& mask, const Oracle& o, Rng&) {
    const MaskColumns split = mask.split_columns(o.len);
    std::vector<char> is_column(static_cast<std::size_t>(o.len), 0);
    for (std::size_t i = 0; i < split.columns.size(); ++i) {
      const Tokens c = split.columns[i];
      ASSERT_TRUE(c >= 0 && c < o.len) << describe(mask, o.len) << " column " << c;
      ASSERT_FALSE(is_column[static_cast<std::size_t>(c)]) << describe(mask, o.len) << " repeats " << c;
      is_column[static_cast<std::size_t>(c)] = 1;
      if (i > 0) {
        ASSERT_LT(mask.source_position(split.columns[i - 1], o.len), mask.source_position(c, o.len))
            << describe(mask, o.len);
      }
    }
    with_columns += split.columns.empty() ? 0 : 1;
    for (Tokens q = 0; q < o.len; ++q) {
      for (Tokens k = 0; k < o.len; ++k) {
        const bool column_sees = is_column[static_cast<std::size_t>(k)] != 0 &&
                                 mask.source_position(k, o.len) <= mask.source_position(q, o.len);
        ASSERT_EQ(split.rest.allows(q, k, o.len) || column_sees, o.at(q, k))
            << describe(mask, o.len) << " q=" << q << " k=" << k;
      }
    }
  });
  EXPECT_GT(with_columns, 10);  // the cases hold column masks, plain and striped
}

// What plan::verify relies on: between consecutive breakpoint rows, visible(q) ∩ [a, b) for any key
// edges a < b keeps its number of ranges and every endpoint moves linearly with q.
TEST(MaskSpec, VisibleShapeIsLinearBetweenRowBreakpoints) {
  for_each_case(10, [](const MaskSpec& mask, const Oracle& o, Rng& rng) {
    std::vector<Tokens> edges = {0, o.len};
    for (int i = 0; i < 4; ++i) edges.push_back(rng.uniform_int(0, o.len));
    std::vector<Tokens> rows = mask.row_breakpoints(edges, o.len);
    rows.push_back(0);
    rows.push_back(o.len);
    std::sort(rows.begin(), rows.end());
    rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
    auto shape = [&](Tokens q) {
      std::vector<Tokens> ends;
      const auto visible = mask.visible(q, o.len);
      ends.push_back(visible.size());
      for (Tokens a : edges) {
        for (Tokens b : edges) {
          if (a >= b) continue;
          for (const auto& r : visible) {
            ends.push_back(std::max(r.begin, a));
            ends.push_back(std::min(r.end, b));
          }
        }
      }
      return ends;
    };
    for (std::size_t i = 0; i + 1 < rows.size(); ++i) {
      for (Tokens q = rows[i] + 1; q + 1 < rows[i + 1]; ++q) {
        const auto before = shape(q - 1), here = shape(q), after = shape(q + 1);
        ASSERT_EQ(before.size(), here.size()) << describe(mask, o.len) << " q=" << q;
        ASSERT_EQ(after.size(), here.size()) << describe(mask, o.len) << " q=" << q;
        ASSERT_EQ(before[0], here[0]) << describe(mask, o.len) << " q=" << q;
        for (std::size_t j = 1; j < here.size(); ++j) {
          ASSERT_EQ(here[j] - before[j], after[j] - here[j]) << describe(mask, o.len) << " q=" << q << " j=" << j;
        }
      }
    }
  });
}

}  // namespace
}  // namespace fulcrum

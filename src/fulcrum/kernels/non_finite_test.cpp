// Non-finite inputs against the fp64 reference (non_finite.hpp): a NaN planted in Q, K, V or dO makes
// exactly the outputs the reference makes NaN non-finite (dV: at least those), under every mask kind,
// GQA, several tasks sharing keys; every other output still equals the reference.
#include "fulcrum/kernels/kernel_test_cases.hpp"
#include "fulcrum/kernels/merge.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace fulcrum::kernels {
namespace {

using testing::Problem;

constexpr double kFp32Tolerance = 1e-5;

// Plants `value` into `count` random elements of x.
void plant(Rng& rng, std::vector<double>& x, int count, double value) {
  for (int i = 0; i < count; ++i) x[static_cast<std::size_t>(rng.uniform_int(0, std::ssize(x) - 1))] = value;
}

// Per `dim`-long row: where want has a non-finite element, so has got (and, when `exact`, only there).
// Returns the rows got has non-finite.
template <class A, class B>
std::size_t expect_rows(const std::vector<A>& got, const std::vector<B>& want, std::size_t dim, bool exact,
                        const std::string& what) {
  EXPECT_EQ(got.size(), want.size());
  if (got.size() != want.size()) return 0;
  std::size_t poisoned = 0;
  for (std::size_t row = 0; row * dim < want.size(); ++row) {
    bool got_bad = false, want_bad = false;
    for (std::size_t c = row * dim; c < (row + 1) * dim; ++c) {
      got_bad |= !std::isfinite(static_cast<double>(got[c]));
      want_bad |= !std::isfinite(static_cast<double>(want[c]));
    }
    poisoned += got_bad ? 1 : 0;
    EXPECT_TRUE(got_bad || !want_bad) << what << " row " << row << ": finite where the reference is not";
    EXPECT_TRUE(!exact || want_bad || !got_bad) << what << " row " << row << ": NaN where the reference is finite";
  }
  return poisoned;
}

// Rows where the reference is finite agree with it; non-finite rows are skipped by relative_error.
template <class A>
void expect_finite_rows_match(const std::vector<A>& got, std::vector<double> want, std::size_t dim,
                              const std::string& what) {
  for (std::size_t row = 0; row * dim < want.size(); ++row) {
    bool bad = false;
    for (std::size_t c = row * dim; c < (row + 1) * dim; ++c) bad |= !std::isfinite(static_cast<double>(got[c]));
    if (bad)
      std::fill(want.begin() + static_cast<std::ptrdiff_t>(row * dim),
                want.begin() + static_cast<std::ptrdiff_t>((row + 1) * dim), std::nan(""));
  }
  EXPECT_LE(testing::relative_error(got, want), kFp32Tolerance) << what;
}

// The reference's LSE of a row with no visible key is -inf, finite in spirit: compare only named cells.
// Returns the output rows poisoned.
std::size_t check(const Problem& p, const std::string& label, bool backward) {
  SCOPED_TRACE(label);
  const auto want = reference_attention(p.tasks, p.shape, p.q, p.k, p.v, backward ? p.d_o : std::vector<double>{});
  const auto got = testing::run_kernels<float>(p, backward);
  const auto named = testing::named_cells(p);
  const auto dim = static_cast<std::size_t>(p.shape.head_dim);
  std::vector<float> o, lse;
  std::vector<double> want_o, want_lse;
  for (std::size_t cell = 0; cell < named.size(); ++cell) {
    if (!named[cell]) continue;
    for (std::size_t c = 0; c < dim; ++c) {
      o.push_back(got.o[cell * dim + c]);
      want_o.push_back(want.o[cell * dim + c]);
    }
    // -inf (no visible key) is an answer, not a poison: compare it as a number.
    const auto finite_or_nan = [](double x) { return std::isinf(x) && x < 0 ? -1e300 : x; };
    lse.push_back(static_cast<float>(finite_or_nan(got.lse[cell])));
    want_lse.push_back(finite_or_nan(want.lse[cell]));
  }
  std::size_t poisoned = expect_rows(o, want_o, dim, true, "O");
  expect_rows(lse, want_lse, 1, false, "LSE");  // the reference's LSE does not read V: a superset
  expect_finite_rows_match(o, want_o, dim, "O");
  if (!backward) return poisoned;
  poisoned += expect_rows(got.dq, want.dq, dim, true, "dQ");
  poisoned += expect_rows(got.dk, want.dk, dim, true, "dK");
  poisoned += expect_rows(got.dv, want.dv, dim, false, "dV");  // dV does not read O: a superset
  expect_finite_rows_match(got.dq, want.dq, dim, "dQ");
  expect_finite_rows_match(got.dk, want.dk, dim, "dK");
  expect_finite_rows_match(got.dv, want.dv, dim, "dV");
  return poisoned;
}

AttentionShape small_shape(Rng& rng) {
  const int kv = static_cast<int>(rng.uniform_int(1, 2));
  return {kv * static_cast<int>(rng.uniform_int(1, 3)), kv, 64, 0};
}

TEST(NonFinite, NanInAnyInputPoisonsExactlyWhatTheReferencePoisons) {
  Rng rng(31);
  std::size_t poisoned = 0;
  for (int kind = 0; kind < testing::mask_kind_count(); ++kind) {
    for (int trial = 0; trial < 3; ++trial) {
      const std::vector<Tokens> lengths = {rng.uniform_int(1, 200), rng.uniform_int(1, 150)};
      const MaskSpec mask = testing::every_mask(rng, lengths[0])[static_cast<std::size_t>(kind)];
      Problem p = testing::make_problem(rng, small_shape(rng), lengths, mask, 3, trial % 2 == 1, false);
      const double nan = std::numeric_limits<double>::quiet_NaN();
      auto* tensor =
          std::vector<std::vector<double>*>{&p.q, &p.k, &p.v, &p.d_o}[static_cast<std::size_t>(trial + kind) % 4];
      plant(rng, *tensor, static_cast<int>(rng.uniform_int(1, 3)), nan);
      poisoned += check(p, fmt::format("mask {} trial {}", mask.to_string(), trial), true);
    }
  }
  EXPECT_GT(poisoned, 100u);  // the NaNs landed in rows the tasks read, not only in padding
}

TEST(NonFinite, InfinityInVIsNonFiniteWhereTheReferenceIsAndInQOrKAtLeastThere) {
  Rng rng(32);
  for (int trial = 0; trial < 6; ++trial) {
    Problem p =
        testing::make_problem(rng, small_shape(rng), {rng.uniform_int(20, 300)}, MaskSpec::causal(), 2, false, false);
    const double inf = trial % 2 == 0 ? INFINITY : -INFINITY;
    plant(rng, trial < 2 ? p.v : (trial < 4 ? p.q : p.k), 2, inf);
    SCOPED_TRACE(fmt::format("trial {}", trial));
    const auto want = reference_attention(p.tasks, p.shape, p.q, p.k, p.v, {});
    const auto got = testing::run_kernels<float>(p, false);
    // An infinite score of -inf is a zero weight in the reference, so Q and K give a superset.
    EXPECT_GT(expect_rows(got.o, want.o, static_cast<std::size_t>(p.shape.head_dim), trial < 2, "O"), 0u);
  }
}

TEST(NonFinite, Bf16InputsPropagateToo) {
  Rng rng(33);
  Problem p = testing::make_problem(rng, {4, 2, 64, 0}, {130, 70}, MaskSpec::causal(), 3, false, true);
  p.k[static_cast<std::size_t>(5 * 2 * 64)] = std::nan("");  // key row 5, kv head 0
  const auto want = reference_attention(p.tasks, p.shape, p.q, p.k, p.v, p.d_o);
  const auto got = testing::run_kernels<BFloat16>(p, true);
  EXPECT_GT(expect_rows(got.dq, want.dq, 64, true, "dQ"), 0u);
  EXPECT_GT(expect_rows(got.dk, want.dk, 64, true, "dK"), 0u);
}

TEST(NonFinite, AllFiniteInputsLeaveTheOutputsUntouched) {
  // The propagation pass must not add NaN anywhere when there is nothing to propagate; padding rows
  // nobody names may hold anything (here NaN) and must not count.
  Rng rng(34);
  Problem p = testing::make_problem(rng, {2, 1, 64, 0}, {100, 90}, MaskSpec::causal(), 2, false, false);
  const auto named = testing::named_cells(p);
  for (std::size_t cell = 0; cell < named.size(); ++cell) {
    if (!named[cell]) std::fill_n(p.q.begin() + static_cast<std::ptrdiff_t>(cell * 64), 64, std::nan(""));
  }
  const auto got = testing::run_kernels<float>(p, true);
  for (std::size_t cell = 0; cell < named.size(); ++cell) {
    ASSERT_TRUE(!named[cell] || std::isfinite(got.o[cell * 64])) << "cell " << cell;
  }
  for (float x : got.dk) ASSERT_TRUE(std::isfinite(x));
}

TEST(NonFinite, MergeKeepsANanPartNanEvenBesideEmptyParts) {
  std::vector<float> o1(4, 0.0f), o2(4, 1.0f), lse1 = {-INFINITY}, lse2 = {std::nanf("")};
  std::vector<float> o(4, 0.0f), lse(1, 0.0f);
  const std::vector<PartialResult<float>> parts = {{{o1.data(), 1, 1, 4}, {lse1.data(), 1, 1, 1}},
                                                   {{o2.data(), 1, 1, 4}, {lse2.data(), 1, 1, 1}}};
  merge_partials<float>(parts, {o.data(), 1, 1, 4}, {lse.data(), 1, 1, 1});
  EXPECT_TRUE(std::isnan(lse[0]));
  EXPECT_TRUE(std::isnan(o[0]));
}

}  // namespace
}  // namespace fulcrum::kernels

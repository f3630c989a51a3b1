// The fused kernels against the fp64 reference on random problems: every mask kind, GQA ratios 1, 4
// and 8, head dims 64 and 128, lengths 1..2048 (most not multiples of the 64-row tile), several tasks
// per document sharing key rows, head+tail query pairs and key ranges that start inside the document.
#include "fulcrum/core/error.hpp"
#include "fulcrum/core/simd_path.hpp"
#include "fulcrum/kernels/kernel_test_cases.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

namespace fulcrum::kernels {
namespace {

using testing::Outputs;
using testing::Problem;
using testing::run_kernels;

constexpr double kFp32Tolerance = 1e-5;

// The reference leaves unnamed rows at 0; the kernel leaves them at the sentinel. Compare named cells.
void expect_untouched_and_mask(const Problem& p, Outputs& got, MaterialisedResult<double>& want) {
  const auto named = testing::named_cells(p);
  const auto dim = static_cast<std::size_t>(p.shape.head_dim);
  for (std::size_t cell = 0; cell < named.size(); ++cell) {
    if (named[cell]) continue;
    ASSERT_EQ(got.lse[cell], 7.0f) << "LSE of unnamed cell " << cell << " was written";
    ASSERT_EQ(got.o[cell * dim], 7.0f) << "O of unnamed cell " << cell << " was written";
    got.lse[cell] = 0;
    for (std::size_t c = 0; c < dim; ++c) got.o[cell * dim + c] = 0;
  }
  for (std::size_t cell = 0; cell < named.size(); ++cell) {
    if (!named[cell] || !std::isinf(want.lse[cell])) continue;
    // No visible key: O = 0 and LSE = -inf exactly, never NaN.
    ASSERT_TRUE(std::isinf(got.lse[cell]) && got.lse[cell] < 0) << "cell " << cell << " lse " << got.lse[cell];
    for (std::size_t c = 0; c < dim; ++c) ASSERT_EQ(got.o[cell * dim + c], 0.0f);
  }
  for (auto* t : {&got.o, &got.lse, &got.dq, &got.dk, &got.dv}) {
    for (float x : *t) ASSERT_FALSE(std::isnan(x));
  }
}

void check_fp32(const Problem& p, const std::string& label) {
  SCOPED_TRACE(label);
  auto want = reference_attention(p.tasks, p.shape, p.q, p.k, p.v, p.d_o);
  auto got = run_kernels<float>(p, true);
  expect_untouched_and_mask(p, got, want);
  EXPECT_LE(testing::relative_error(got.o, want.o), kFp32Tolerance);
  EXPECT_LE(testing::relative_error(got.lse, want.lse), kFp32Tolerance);
  EXPECT_LE(testing::relative_error(got.dq, want.dq), kFp32Tolerance);
  EXPECT_LE(testing::relative_error(got.dk, want.dk), kFp32Tolerance);
  EXPECT_LE(testing::relative_error(got.dv, want.dv), kFp32Tolerance);
}

AttentionShape random_shape(Rng& rng) {
  static const int kGroups[] = {1, 4, 8};
  const int kv = static_cast<int>(rng.uniform_int(1, 2));
  return {kv * kGroups[rng.uniform_int(0, 2)], kv, rng.uniform() < 0.5 ? 64 : 128, 0};
}

class EveryMask : public ::testing::TestWithParam<int> {};

TEST_P(EveryMask, Fp32ForwardAndBackwardMatchTheFp64Reference) {
  Rng rng(1000 + static_cast<std::uint64_t>(GetParam()));
  for (int trial = 0; trial < 4; ++trial) {
    std::vector<Tokens> lengths;
    for (int d = static_cast<int>(rng.uniform_int(1, 3)); d > 0; --d) lengths.push_back(rng.uniform_int(1, 200));
    const MaskSpec mask = testing::every_mask(rng, lengths[0])[static_cast<std::size_t>(GetParam())];
    const Problem p = testing::make_problem(rng, random_shape(rng), lengths, mask, 4, trial % 2 == 1, false);
    check_fp32(p, fmt::format("trial {} mask {} lengths {}", trial, mask.to_string(), fmt::join(lengths, ",")));
  }
}

TEST_P(EveryMask, LongDocumentUpTo2048Tokens) {
  Rng rng(2000 + static_cast<std::uint64_t>(GetParam()));
  const Tokens len = rng.uniform_int(1200, 2048);
  const MaskSpec mask = testing::every_mask(rng, len)[static_cast<std::size_t>(GetParam())];
  const Problem p = testing::make_problem(rng, {2, 1, 64, 0}, {len}, mask, 3, false, false);
  check_fp32(p, fmt::format("mask {} length {}", mask.to_string(), len));
}

INSTANTIATE_TEST_SUITE_P(Kernels, EveryMask, ::testing::Range(0, testing::mask_kind_count()));

// One build carries a version of the kernels per ISA (core/simd.hpp); the tests above run the one this
// CPU picks. Every other version it can run is checked here the same way: every mask kind, head dims
// of whole vectors (64, 128) and one that is not (72: the element-wise transpose), GQA, and lengths that
// are not multiples of any vector width.
TEST(KernelIsas, EveryVersionThisCpuRunsMatchesTheFp64Reference) {
  const simd::Isa before = simd::active_isa();
  for (const simd::Isa isa : {simd::Isa::kBaseline, simd::Isa::kAvx2, simd::Isa::kAvx512}) {
    if (!simd::cpu_supports(isa)) continue;
    simd::select_isa(isa);
    Rng rng(4000 + static_cast<std::uint64_t>(isa));
    for (int kind = 0; kind < testing::mask_kind_count(); ++kind) {
      std::vector<Tokens> lengths = {rng.uniform_int(1, 300), rng.uniform_int(1, 90)};
      const MaskSpec mask = testing::every_mask(rng, lengths[0])[static_cast<std::size_t>(kind)];
      const AttentionShape shape{4, 2, kind % 3 == 0 ? 72 : (kind % 3 == 1 ? 64 : 128), 0};
      const Problem p = testing::make_problem(rng, shape, lengths, mask, 3, kind % 2 == 1, false);
      check_fp32(p, fmt::format("{} mask {} head dim {} lengths {}", simd::to_string(isa), mask.to_string(),
                                shape.head_dim, fmt::join(lengths, ",")));
    }
  }
  simd::select_isa(before);
}

TEST(Kernels, RowsWithNoVisibleKeyGiveZeroOutputAndMinusInfinityLse) {
  // Keys [40, 64) under a causal mask: query rows 0..39 see nothing.
  Rng rng(7);
  Problem p = testing::make_problem(rng, {4, 2, 64, 0}, {64}, MaskSpec::causal(), 1, false, false);
  p.tasks[0].keys = {p.tasks[0].keys.row + 40, 40, 24};
  check_fp32(p, "keys after the queries");
}

TEST(Kernels, SplittingWorkIntoMoreTasksDoesNotChangeTheResult) {
  Rng rng(8);
  const Problem whole = testing::make_problem(rng, {8, 2, 128, 0}, {700}, MaskSpec::causal(), 1, false, false);
  Problem sharded = whole;
  sharded.tasks.clear();
  for (Tokens begin = 0; begin < 700; begin += 100) {
    AttentionTask t = whole.tasks[0];
    t.queries = {RowSpan{whole.tasks[0].queries[0].row + begin, begin, std::min<Tokens>(100, 700 - begin)}, RowSpan{}};
    sharded.tasks.push_back(t);
  }
  const auto a = run_kernels<float>(whole, true), b = run_kernels<float>(sharded, true);
  // Only the order of the atomic dK/dV additions differs.
  EXPECT_LE(testing::relative_error(b.o, a.o), 1e-6);
  EXPECT_LE(testing::relative_error(b.dk, a.dk), kFp32Tolerance);
  EXPECT_LE(testing::relative_error(b.dq, a.dq), 1e-6);
}

TEST(Kernels, ScoresJumpingBetweenKeyTilesMatchTheFp64Reference) {
  // Every key tile's scores sit `jump` (natural log) above the tile before, through a constant first
  // component of Q against a per-tile first component of K. The forward moves a row's reference
  // maximum only when a tile exceeds it by more than 2^8: a jump of 3 (4.3 in base 2) keeps it for a
  // tile and lets p grow towards 2^8, 6 (8.7) moves it at every tile, -6 never after the first.
  for (const double jump : {3.0, 6.0, -6.0}) {
    Rng rng(10);
    Problem p = testing::make_problem(rng, {2, 1, 64, 0}, {330}, MaskSpec::causal(), 2, false, false);
    const auto dim = static_cast<std::size_t>(p.shape.head_dim);
    const Tokens first_row = p.tasks[0].keys.row;
    for (std::size_t cell = 0; cell < p.q.size() / dim; ++cell) p.q[cell * dim] = 1.0;
    for (Tokens row = first_row; row < p.kv_rows; ++row) {
      p.k[static_cast<std::size_t>(row) * dim] =
          jump * static_cast<double>((row - first_row) / 64) / p.shape.softmax_scale();
    }
    check_fp32(p, fmt::format("jump {}", jump));
  }
}

// bf16 storage: O, dQ, dK and dV at most twice the error of a naive bf16 implementation of the same
// tasks, both against the fp64 reference; cells no task writes untouched.
void expect_bf16_within_twice_naive(const Problem& p, const std::string& what) {
  auto truth = reference_attention(p.tasks, p.shape, p.q, p.k, p.v, p.d_o);
  auto as_float = [](const std::vector<double>& x) { return std::vector<float>(x.begin(), x.end()); };
  auto naive = naive_bf16_attention(p.tasks, p.shape, as_float(p.q), as_float(p.k), as_float(p.v), as_float(p.d_o));
  auto got = run_kernels<BFloat16>(p, true);
  expect_untouched_and_mask(p, got, truth);
  const std::pair<const std::vector<float>*, const std::vector<double>*> outputs[] = {
      {&got.o, &truth.o}, {&got.dq, &truth.dq}, {&got.dk, &truth.dk}, {&got.dv, &truth.dv}};
  const std::vector<float>* naive_outputs[] = {&naive.o, &naive.dq, &naive.dk, &naive.dv};
  for (std::size_t i = 0; i < 4; ++i) {
    const double ours = testing::relative_error(*outputs[i].first, *outputs[i].second);
    const double theirs = testing::relative_error(*naive_outputs[i], *outputs[i].second);
    EXPECT_LE(ours, 2 * theirs) << what << " output " << i << ": kernel " << ours << ", naive bf16 " << theirs;
  }
}

TEST(Kernels, Bf16ErrorIsAtMostTwiceANaiveBf16Implementation) {
  Rng rng(9);
  for (int mask_index : {0, 2, 4, 6}) {
    std::vector<Tokens> lengths = {rng.uniform_int(100, 400), rng.uniform_int(1, 100)};
    const MaskSpec mask = testing::every_mask(rng, lengths[0])[static_cast<std::size_t>(mask_index)];
    const Problem p = testing::make_problem(rng, {4, 1, 128, 0}, lengths, mask, 3, false, true);
    expect_bf16_within_twice_naive(p, mask.to_string());
  }
}

// Heads in one fused call: tasks over different head ranges share query and key rows, every head has
// its own mask (kinds mixed across the heads of one call), and some (row, head) cells belong to no
// task. fp32 within kFp32Tolerance of the fp64 reference; cells of heads outside every task untouched.
TEST(KernelHeads, MixedHeadRangesAndPerHeadMasksMatchTheFp64Reference) {
  Rng rng(31);
  for (int trial = 0; trial < 12; ++trial) {
    std::vector<Tokens> lengths;
    for (int d = static_cast<int>(rng.uniform_int(1, 3)); d > 0; --d) lengths.push_back(rng.uniform_int(1, 200));
    Problem p = testing::make_problem(rng, random_shape(rng), lengths, MaskSpec::causal(), 3, trial % 2 == 1, false);
    testing::split_heads(rng, p, testing::every_mask(rng, lengths[0]), trial % 3 == 0);
    std::string masks;
    for (const auto& m : *p.head_masks) masks += m.to_string() + " ";
    check_fp32(p, fmt::format("trial {} heads {} masks {}lengths {} tasks {}", trial, p.shape.q_heads, masks,
                              fmt::join(lengths, ","), p.tasks.size()));
  }
}

// Hundreds of vertical columns per head (computed as gathered tiles), per-head masks under GQA so
// several heads' column sets add into one kv head's dK/dV, tasks sharing key rows and key ranges that
// start inside the document.
TEST(KernelHeads, ManyGatheredColumnsPerHeadMatchTheFp64Reference) {
  Rng rng(37);
  for (int trial = 0; trial < 3; ++trial) {
    const Tokens len = 64 * rng.uniform_int(16, 26);
    Problem p = testing::make_problem(rng, {8, 2, 64, 0}, {len}, MaskSpec::causal(), 3, trial == 1, false);
    testing::split_heads(rng, p, testing::many_column_masks(rng, len), false);
    check_fp32(p, fmt::format("trial {} length {} tasks {}", trial, len, p.tasks.size()));
  }
  Problem one_mask = testing::make_problem(rng, {4, 2, 64, 0}, {1280}, testing::many_column_masks(rng, 1280)[0], 2,
                                           true, false);  // one mask: the group's heads share a column set
  check_fp32(one_mask, "one vsblocks mask for every head");
}

// bf16 storage with head ranges and per-head masks: at most twice the error of a naive bf16
// implementation of the same tasks, against the fp64 reference.
TEST(KernelHeads, Bf16ErrorWithHeadRangesIsAtMostTwiceANaiveBf16Implementation) {
  Rng rng(32);
  for (int trial = 0; trial < 4; ++trial) {
    std::vector<Tokens> lengths = {rng.uniform_int(100, 300), rng.uniform_int(1, 100)};
    Problem p = testing::make_problem(rng, {8, 2, 64, 0}, lengths, MaskSpec::causal(), 3, false, true);
    testing::split_heads(rng, p, testing::every_mask(rng, lengths[0]), trial == 3);
    expect_bf16_within_twice_naive(p, fmt::format("trial {}", trial));
  }
}

TEST(KernelHeads, OneWriterPerRowAndHead) {
  Rng rng(33);
  Problem p = testing::make_problem(rng, {4, 2, 64, 0}, {100}, MaskSpec::causal(), 1, false, false);
  AttentionTask a = p.tasks[0], b = p.tasks[0];
  a.heads = {0, 2};
  b.heads = {2, 4};
  // Disjoint heads of the same rows: one writer per (row, head), accepted.
  EXPECT_NO_THROW(validate_tasks(std::vector<AttentionTask>{a, b}, p.q_rows, p.kv_rows, 4));
  b.heads = {1, 4};
  try {
    validate_tasks(std::vector<AttentionTask>{a, b}, p.q_rows, p.kv_rows, 4);
    FAIL() << "overlapping heads of shared rows were accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("heads [1, 4)"), std::string::npos) << e.what();
  }
  b.heads = {2, 5};
  try {
    validate_tasks(std::vector<AttentionTask>{a, b}, p.q_rows, p.kv_rows, 4);
    FAIL() << "a head past q_heads was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tasks[1].heads = [2, 5)"), std::string::npos) << e.what();
  }
  const std::vector<MaskSpec> three(3, MaskSpec::causal());
  a.head_masks = three;
  try {
    validate_tasks(std::vector<AttentionTask>{a}, p.q_rows, p.kv_rows, 4);
    FAIL() << "3 head masks for 4 heads were accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tasks[0].head_masks"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace fulcrum::kernels

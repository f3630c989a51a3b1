// Splitting a query row's keys into parts, computing each part separately and merging must equal
// the unsplit result, forward (merge_partials) and backward (each part run with the merged O/LSE).
#include "fulcrum/kernels/merge.hpp"
#include "fulcrum/kernels/kernel_test_cases.hpp"

#include "fulcrum/core/error.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

namespace fulcrum::kernels {
namespace {

struct Result {
  std::vector<float> o, lse, dq, dk, dv;
};

// Forward over `tasks` (same buffers as p), then backward using the given O/LSE (or its own).
Result compute(const testing::Problem& p, std::span<const AttentionTask> tasks, const Result* merged) {
  const auto& s = p.shape;
  auto q = testing::stored<float>(p.q), k = testing::stored<float>(p.k), v = testing::stored<float>(p.v);
  auto d_o = testing::stored<float>(p.d_o);
  Result r;
  r.o.assign(p.q.size(), 0.0f);
  r.lse.assign(static_cast<std::size_t>(p.q_rows * s.q_heads), -INFINITY);  // padding rows: "no keys"
  auto qv = testing::view(q, p.q_rows, s.q_heads, s.head_dim);
  auto kv = testing::view(k, p.kv_rows, s.kv_heads, s.head_dim);
  auto vv = testing::view(v, p.kv_rows, s.kv_heads, s.head_dim);
  attention_forward<float>(tasks, s, qv, kv, vv, testing::view(r.o, p.q_rows, s.q_heads, s.head_dim),
                           testing::view(r.lse, p.q_rows, s.q_heads, 1));
  if (merged == nullptr) return r;
  r.dq.assign(p.q.size(), 0.0f);
  r.dk.assign(p.k.size(), 0.0f);
  r.dv.assign(p.v.size(), 0.0f);
  attention_backward<float>(
      tasks, s, qv, kv, vv, {merged->o.data(), p.q_rows, s.q_heads, s.head_dim},
      testing::view(d_o, p.q_rows, s.q_heads, s.head_dim), {merged->lse.data(), p.q_rows, s.q_heads, 1},
      testing::view(r.dq, p.q_rows, s.q_heads, s.head_dim), testing::view(r.dk, p.kv_rows, s.kv_heads, s.head_dim),
      testing::view(r.dv, p.kv_rows, s.kv_heads, s.head_dim));
  return r;
}

TEST(Merge, RandomKeySplitsEqualTheUnsplitResultForwardAndBackward) {
  Rng rng(31);
  for (int trial = 0; trial < 12; ++trial) {
    const Tokens len = rng.uniform_int(1, 400);
    const MaskSpec mask = testing::every_mask(rng, len)[static_cast<std::size_t>(trial % testing::mask_kind_count())];
    const testing::Problem p = testing::make_problem(rng, {4, 2, 64, 0}, {len}, mask, 3, false, false);
    SCOPED_TRACE(fmt::format("trial {} mask {} len {}", trial, mask.to_string(), len));
    const Result whole = compute(p, p.tasks, nullptr);

    // Cut the key range at 1..3 random points; every part is a separate call over the same rows.
    std::vector<Tokens> cuts = {0, len};
    for (int i = static_cast<int>(rng.uniform_int(1, 3)); i > 0; --i) cuts.push_back(rng.uniform_int(0, len));
    std::sort(cuts.begin(), cuts.end());
    std::vector<std::vector<AttentionTask>> parts;
    for (std::size_t c = 0; c + 1 < cuts.size(); ++c) {
      auto tasks = p.tasks;
      for (auto& t : tasks) t.keys = {t.keys.row - t.keys.position + cuts[c], cuts[c], cuts[c + 1] - cuts[c]};
      parts.push_back(tasks);
    }
    std::vector<Result> partial;
    for (const auto& tasks : parts) partial.push_back(compute(p, tasks, nullptr));
    std::vector<PartialResult<float>> views;
    const auto& s = p.shape;
    for (const auto& r : partial) {
      views.push_back({{r.o.data(), p.q_rows, s.q_heads, s.head_dim}, {r.lse.data(), p.q_rows, s.q_heads, 1}});
    }
    Result merged;
    merged.o.assign(p.q.size(), 0.0f);
    merged.lse.assign(whole.lse.size(), 0.0f);
    merge_partials<float>(views, testing::view(merged.o, p.q_rows, s.q_heads, s.head_dim),
                          testing::view(merged.lse, p.q_rows, s.q_heads, 1));
    EXPECT_LE(testing::relative_error(merged.o, whole.o), 1e-5);
    EXPECT_LE(testing::relative_error(merged.lse, whole.lse), 1e-5);

    // Backward: every part with the merged O/LSE; dQ sums over parts, dK/dV fall on disjoint keys.
    const Result reference = compute(p, p.tasks, &whole);
    std::vector<float> dq(p.q.size(), 0.0f), dk(p.k.size(), 0.0f), dv(p.v.size(), 0.0f);
    for (const auto& tasks : parts) {
      const Result r = compute(p, tasks, &merged);
      for (std::size_t i = 0; i < dq.size(); ++i) dq[i] += r.dq[i];
      for (std::size_t i = 0; i < dk.size(); ++i) dk[i] += r.dk[i], dv[i] += r.dv[i];
    }
    EXPECT_LE(testing::relative_error(dq, reference.dq), 1e-5);
    EXPECT_LE(testing::relative_error(dk, reference.dk), 1e-5);
    EXPECT_LE(testing::relative_error(dv, reference.dv), 1e-5);
  }
}

TEST(Merge, BothPartsEmptyStaysZeroWithMinusInfinityLse) {
  const float minus_inf = -INFINITY;
  std::vector<float> o1 = {0, 0}, o2 = {0, 0}, l1 = {minus_inf}, l2 = {minus_inf}, out = {5, 5}, lse = {5};
  const PartialResult<float> parts[] = {{{o1.data(), 1, 1, 2}, {l1.data(), 1, 1, 1}},
                                        {{o2.data(), 1, 1, 2}, {l2.data(), 1, 1, 1}}};
  merge_partials<float>(parts, {out.data(), 1, 1, 2}, {lse.data(), 1, 1, 1});
  EXPECT_EQ(out, (std::vector<float>{0, 0}));
  EXPECT_TRUE(std::isinf(lse[0]) && lse[0] < 0);
}

TEST(Merge, MismatchedPartShapesAreRejected) {
  std::vector<float> a(8), b(4), la(4), lb(2);
  const PartialResult<float> parts[] = {{{a.data(), 4, 1, 2}, {la.data(), 4, 1, 1}},
                                        {{b.data(), 2, 1, 2}, {lb.data(), 2, 1, 1}}};
  try {
    merge_partials<float>(parts, {a.data(), 4, 1, 2}, {la.data(), 4, 1, 1});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("parts[1].o"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace fulcrum::kernels

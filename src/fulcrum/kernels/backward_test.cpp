// The backward kernel's deterministic mode: dQ, dK and dV bitwise identical across repeated calls and
// at 1, 2 and 4 OpenMP threads, on problems where several tasks read the same key rows (the rows the
// fast path adds into atomically), and as accurate as the fast path against the fp64 reference.
#include "fulcrum/kernels/kernel_test_cases.hpp"
#include "fulcrum/kernels/tiles.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <omp.h>

#include <cstring>

namespace fulcrum::kernels {
namespace {

using testing::Problem;

constexpr double kFp32Tolerance = 1e-5;  // as attention_test.cpp: relative to the tensor's scale

struct Gradients {
  std::vector<float> dq, dk, dv;
};

bool bitwise_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Runs the forward once, then the backward at each thread count `repeats` times.
template <class T>
class Runner {
 public:
  explicit Runner(const Problem& p)
      : p_(p),
        q_(testing::stored<T>(p.q)),
        k_(testing::stored<T>(p.k)),
        v_(testing::stored<T>(p.v)),
        d_o_(testing::stored<T>(p.d_o)),
        o_(p.q.size()),
        lse_(static_cast<std::size_t>(p.q_rows * p.shape.q_heads)) {
    const auto& s = p.shape;
    attention_forward<T>(p.tasks, s, view(q_, s.q_heads), view(k_, s.kv_heads, true), view(v_, s.kv_heads, true),
                         view(o_, s.q_heads), HeadTensor<float>{lse_.data(), p.q_rows, s.q_heads, 1});
  }

  Gradients backward(bool deterministic) {
    AttentionShape s = p_.shape;
    s.deterministic = deterministic;
    Gradients g{std::vector<float>(p_.q.size(), 0.0f), std::vector<float>(p_.k.size(), 0.0f),
                std::vector<float>(p_.v.size(), 0.0f)};
    attention_backward<T>(
        p_.tasks, s, view(q_, s.q_heads), view(k_, s.kv_heads, true), view(v_, s.kv_heads, true), view(o_, s.q_heads),
        view(d_o_, s.q_heads), HeadTensor<const float>{lse_.data(), p_.q_rows, s.q_heads, 1},
        {g.dq.data(), p_.q_rows, s.q_heads, s.head_dim}, {g.dk.data(), p_.kv_rows, s.kv_heads, s.head_dim},
        {g.dv.data(), p_.kv_rows, s.kv_heads, s.head_dim});
    return g;
  }

 private:
  HeadTensor<T> view(std::vector<T>& x, int heads, bool kv = false) {
    return {x.data(), kv ? p_.kv_rows : p_.q_rows, heads, p_.shape.head_dim};
  }

  const Problem& p_;
  std::vector<T> q_, k_, v_, d_o_, o_;
  std::vector<float> lse_;
};

// Restores the OpenMP thread count when a test ends, pass or fail.
class ThreadCount {
 public:
  ThreadCount() : saved_(omp_get_max_threads()) {}
  ~ThreadCount() { omp_set_num_threads(saved_); }
  ThreadCount(const ThreadCount&) = delete;
  ThreadCount& operator=(const ThreadCount&) = delete;

 private:
  int saved_;
};

int shared_key_items(const Problem& p) {
  int shared = 0;
  for (const auto& item : key_tiles(p.tasks, p.shape.q_heads, p.shape.kv_heads)) shared += item.shared ? 1 : 0;
  return shared;
}

template <class T>
void expect_deterministic(const Problem& p, const std::string& label) {
  SCOPED_TRACE(label);
  ASSERT_GT(shared_key_items(p), 0) << "the problem must have tasks that share key rows";
  ThreadCount restore;
  Runner<T> runner(p);
  omp_set_num_threads(1);
  const Gradients first = runner.backward(true);
  for (int threads : {1, 2, 4}) {
    omp_set_num_threads(threads);
    for (int repeat = 0; repeat < 3; ++repeat) {
      const Gradients again = runner.backward(true);
      EXPECT_TRUE(bitwise_equal(again.dq, first.dq)) << threads << " threads, repeat " << repeat << ": dQ differs";
      EXPECT_TRUE(bitwise_equal(again.dk, first.dk)) << threads << " threads, repeat " << repeat << ": dK differs";
      EXPECT_TRUE(bitwise_equal(again.dv, first.dv)) << threads << " threads, repeat " << repeat << ": dV differs";
    }
  }
  // The deterministic sums are as accurate as the atomic ones (fp32 storage only: bf16 rounds the inputs).
  if constexpr (std::is_same_v<T, float>) {
    const auto want = reference_attention(p.tasks, p.shape, p.q, p.k, p.v, p.d_o);
    EXPECT_LE(testing::relative_error(first.dq, want.dq), kFp32Tolerance);
    EXPECT_LE(testing::relative_error(first.dk, want.dk), kFp32Tolerance);
    EXPECT_LE(testing::relative_error(first.dv, want.dv), kFp32Tolerance);
    const Gradients fast = runner.backward(false);
    EXPECT_TRUE(bitwise_equal(fast.dq, first.dq)) << "dQ never needs atomics: both modes agree bitwise";
    EXPECT_LE(testing::relative_error(fast.dk, want.dk), kFp32Tolerance);
  }
}

TEST(DeterministicBackward, BitwiseIdenticalAcrossRunsAndThreadCountsForEveryMask) {
  Rng rng(4100);
  const std::size_t kinds = testing::every_mask(rng, 100).size();
  for (std::size_t kind = 0; kind < kinds; ++kind) {
    // Two documents, each cut into up to 6 tasks that all read the document's keys (some head+tail
    // pairs, key ranges starting inside the document), GQA 4:2 so key items span q-head groups.
    const std::vector<Tokens> lengths = {rng.uniform_int(150, 400), rng.uniform_int(60, 200)};
    const MaskSpec mask = testing::every_mask(rng, lengths[0])[kind];
    const Problem p = testing::make_problem(rng, {4, 2, 64, 0}, lengths, mask, 6, kind % 2 == 1, false);
    if (shared_key_items(p) == 0) continue;  // a draw of one task per document: nothing shared to test
    expect_deterministic<float>(p, fmt::format("mask {}", mask.to_string()));
  }
}

TEST(DeterministicBackward, GatheredColumnsOfSeveralHeadsAndTasks) {
  // Per-head masks with hundreds of columns under GQA 8:2 and tasks sharing keys: column chunks of
  // several heads and tasks add into the same dK/dV rows.
  Rng rng(4150);
  Problem p = testing::make_problem(rng, {8, 2, 64, 0}, {1024}, MaskSpec::causal(), 4, true, false);
  testing::split_heads(rng, p, testing::many_column_masks(rng, 1024), false);
  expect_deterministic<float>(p, "many gathered columns");
}

TEST(DeterministicBackward, LongShardedDocumentInBf16) {
  // One 1,024-token causal document in 8 shards over all its keys: every key tile is shared by several
  // tasks, as on DistCA's servers, with bf16 storage and head_dim 128 (bitwise checks only: the first
  // test checks accuracy).
  Rng rng(4200);
  Problem p = testing::make_problem(rng, {4, 2, 128, 0}, {1024}, MaskSpec::causal(), 1, false, true);
  const AttentionTask whole = p.tasks[0];
  p.tasks.clear();
  for (Tokens begin = 0; begin < 1024; begin += 128) {
    AttentionTask t = whole;
    t.queries = {RowSpan{whole.queries[0].row + begin, begin, 128}, RowSpan{}};
    p.tasks.push_back(t);
  }
  expect_deterministic<BFloat16>(p, "sharded causal, bf16");
}

TEST(DeterministicBackward, AddsIntoExistingGradients) {
  // Like the fast path, the deterministic mode adds to dQ/dK/dV: two calls give twice one call's sum.
  Rng rng(4300);
  const Problem p = testing::make_problem(rng, {2, 1, 64, 0}, {300}, MaskSpec::causal(), 5, false, false);
  ASSERT_GT(shared_key_items(p), 0);
  Runner<float> runner(p);
  const Gradients once = runner.backward(true);
  AttentionShape s = p.shape;
  s.deterministic = true;
  Gradients twice = once;
  std::vector<float> q = testing::stored<float>(p.q), k = testing::stored<float>(p.k), v = testing::stored<float>(p.v);
  std::vector<float> d_o = testing::stored<float>(p.d_o), o(p.q.size()), lse(static_cast<std::size_t>(p.q_rows * 2));
  attention_forward<float>(p.tasks, s, {q.data(), p.q_rows, 2, 64}, {k.data(), p.kv_rows, 1, 64},
                           {v.data(), p.kv_rows, 1, 64}, {o.data(), p.q_rows, 2, 64}, {lse.data(), p.q_rows, 2, 1});
  attention_backward<float>(p.tasks, s, {q.data(), p.q_rows, 2, 64}, {k.data(), p.kv_rows, 1, 64},
                            {v.data(), p.kv_rows, 1, 64}, {o.data(), p.q_rows, 2, 64}, {d_o.data(), p.q_rows, 2, 64},
                            {lse.data(), p.q_rows, 2, 1}, {twice.dq.data(), p.q_rows, 2, 64},
                            {twice.dk.data(), p.kv_rows, 1, 64}, {twice.dv.data(), p.kv_rows, 1, 64});
  for (std::size_t i = 0; i < once.dk.size(); ++i) {
    ASSERT_NEAR(twice.dk[i], 2 * once.dk[i], 1e-5f * (1 + std::abs(once.dk[i]))) << "element " << i;
    ASSERT_NEAR(twice.dv[i], 2 * once.dv[i], 1e-5f * (1 + std::abs(once.dv[i]))) << "element " << i;
  }
}

}  // namespace
}  // namespace fulcrum::kernels

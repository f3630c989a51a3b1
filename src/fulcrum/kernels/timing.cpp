#include "fulcrum/kernels/timing.hpp"

#include "fulcrum/core/error.hpp"
#include "fulcrum/core/random.hpp"
#include "fulcrum/core/statistics.hpp"
#include "fulcrum/cost/attention_cost.hpp"
#include "fulcrum/kernels/attention.hpp"
#include "fulcrum/kernels/simd.hpp"

#include <omp.h>

#include <algorithm>
#include <chrono>

namespace fulcrum::kernels {

DType parse_dtype(const std::string& text) {
  if (text == "fp32") return DType::kF32;
  if (text == "bf16") return DType::kBF16;
  fail("dtype = '{}': expected fp32 or bf16", text);
}

const char* to_string(DType dtype) { return dtype == DType::kF32 ? "fp32" : "bf16"; }

namespace {

using Clock = std::chrono::steady_clock;

#define FULCRUM_ISA_INCLUDE "fulcrum/kernels/fma_loop-inl.hpp"
#include "fulcrum/core/simd_foreach_isa.hpp"

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// Median seconds of `run`, each sample averaged over enough calls to last min_seconds.
template <class F>
double time_median(F&& run, int repeats, double min_seconds) {
  const auto warm = Clock::now();
  run();
  const double once = std::max(seconds_since(warm), 1e-9);
  const int calls = std::max(1, static_cast<int>(min_seconds / once));
  std::vector<double> samples;
  for (int r = 0; r < repeats; ++r) {
    const auto start = Clock::now();
    for (int c = 0; c < calls; ++c) run();
    samples.push_back(seconds_since(start) / calls);
  }
  return median(samples);
}

template <class T>
AttentionTiming time_typed(std::span<const AttentionTask> tasks, const AttentionShape& shape, Tokens q_rows,
                           Tokens kv_rows, int repeats, bool backward, double min_seconds) {
  const auto q_size = static_cast<std::size_t>(q_rows) * shape.q_heads * shape.head_dim;
  const auto kv_size = static_cast<std::size_t>(kv_rows) * shape.kv_heads * shape.head_dim;
  Rng rng(12345);
  auto random = [&](std::size_t n) {
    std::vector<T> x(n);
    for (auto& value : x) value = from_float<T>(static_cast<float>(rng.normal()));
    return x;
  };
  const auto q = random(q_size), k = random(kv_size), v = random(kv_size), d_o = random(q_size);
  std::vector<T> o(q_size);
  std::vector<float> lse(static_cast<std::size_t>(q_rows) * shape.q_heads), dq(q_size), dk(kv_size), dv(kv_size);
  const HeadTensor<const T> qv{q.data(), q_rows, shape.q_heads, shape.head_dim};
  const HeadTensor<const T> kv{k.data(), kv_rows, shape.kv_heads, shape.head_dim};
  const HeadTensor<const T> vv{v.data(), kv_rows, shape.kv_heads, shape.head_dim};
  const HeadTensor<T> ov{o.data(), q_rows, shape.q_heads, shape.head_dim};
  const HeadTensor<float> lv{lse.data(), q_rows, shape.q_heads, 1};

  AttentionTiming t;
  t.forward_flops = forward_flops(tasks, shape);
  t.forward_s = time_median([&] { attention_forward<T>(tasks, shape, qv, kv, vv, ov, lv); }, repeats, min_seconds);
  if (backward) {
    t.backward_flops = t.forward_flops * kBackwardFlopsFactor;
    t.backward_s = time_median(
        [&] {
          attention_backward<T>(tasks, shape, qv, kv, vv, ov, {d_o.data(), q_rows, shape.q_heads, shape.head_dim}, lv,
                                {dq.data(), q_rows, shape.q_heads, shape.head_dim},
                                {dk.data(), kv_rows, shape.kv_heads, shape.head_dim},
                                {dv.data(), kv_rows, shape.kv_heads, shape.head_dim});
        },
        repeats, min_seconds);
  }
  return t;
}

}  // namespace

double measure_fma_peak() {
  // The best of several ~0.3 s trials: clocks ramp and neighbours come and go, and the roofline
  // should be the machine's best, so that percentages of it are never flattering.
  const long iterations = 60'000'000;
  const fulcrum::simd::Isa isa = fulcrum::simd::active_isa();
  double best = 0;
  for (int trial = 0; trial < 5; ++trial) {
    const auto start = Clock::now();
    float sink = 0;
    double flops = 0;
#pragma omp parallel reduction(+ : sink, flops)
    {
      float sum = 0;
      double thread_flops = 0;
      FULCRUM_DISPATCH(isa, fma_loop(iterations, static_cast<float>(omp_get_thread_num()), sum, thread_flops));
      sink += sum;
      flops += thread_flops;
    }
    const double s = seconds_since(start);
    if (sink == 12345.0f) fmt::print("");  // keeps the loop's result alive
    best = std::max(best, flops / s);
  }
  return best;
}

AttentionTiming time_attention(std::span<const AttentionTask> tasks, const AttentionShape& shape, Tokens q_rows,
                               Tokens kv_rows, DType dtype, int repeats, bool backward, double min_seconds) {
  if (repeats < 1) fail("repeats = {}: must be >= 1", repeats);
  return dtype == DType::kF32 ? time_typed<float>(tasks, shape, q_rows, kv_rows, repeats, backward, min_seconds)
                              : time_typed<BFloat16>(tasks, shape, q_rows, kv_rows, repeats, backward, min_seconds);
}

double measured_call_bytes(const AttentionShape& shape, Tokens q_rows, Tokens kv_rows) {
  const double d = shape.head_dim;
  return 4.0 * (static_cast<double>(q_rows) * shape.q_heads * (4 * d + 1) +
                static_cast<double>(kv_rows) * shape.kv_heads * 4 * d);
}

CallOverheads measure_call_overheads(const AttentionShape& shape, DType dtype, int repeats) {
  constexpr Tokens kItems = 64;
  const auto one_token_documents = [](Tokens n) {
    std::vector<AttentionTask> tasks;
    for (Tokens i = 0; i < n; ++i)
      tasks.push_back({{0, {RowSpan{i, 0, 1}, RowSpan{}}, {i, 0, 1}}, 1, MaskSpec::full()});
    return tasks;
  };
  const auto one = time_attention(one_token_documents(1), shape, 1, 1, dtype, repeats, true);
  const auto many = time_attention(one_token_documents(kItems), shape, kItems, kItems, dtype, repeats, true);
  const double per_item = 1.0 / static_cast<double>(kItems - 1);
  const double item = std::max(0.0, (many.forward_s - one.forward_s) * per_item);
  const double backward_item = std::max(0.0, (many.backward_s - one.backward_s) * per_item);
  return {std::max(0.0, one.forward_s - item), item, std::max(0.0, one.backward_s - backward_item), backward_item};
}

std::vector<AttentionTask> sharded_document(Tokens doc_len, Tokens shard, const MaskSpec& mask) {
  if (doc_len < 1) fail("length = {}: must be >= 1", doc_len);
  if (shard < 1) fail("shard = {}: must be >= 1", shard);
  std::vector<AttentionTask> tasks;
  for (Tokens begin = 0; begin < doc_len; begin += shard) {
    const Tokens count = std::min(shard, doc_len - begin);
    tasks.push_back({{0, {RowSpan{begin, begin, count}, RowSpan{}}, {0, 0, doc_len}}, doc_len, mask});
  }
  return tasks;
}

}  // namespace fulcrum::kernels

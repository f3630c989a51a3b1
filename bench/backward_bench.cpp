// The backward kernel's deterministic mode against its atomic fast path, where the two differ: one
// causal document cut into query shards that all read the document's keys (every key tile shared, as
// on a DistCA server), fp32, 8 q / 8 kv heads of 128 (most key items per call).
// Run: build/release/bin/backward_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
// Args: document length, shard length, deterministic (0 | 1).
#include "fulcrum/core/random.hpp"
#include "fulcrum/cost/attention_cost.hpp"
#include "fulcrum/kernels/attention.hpp"
#include "fulcrum/kernels/timing.hpp"

#include <benchmark/benchmark.h>

#include <type_traits>
#include <vector>

namespace fulcrum::kernels {
namespace {

void backward_benchmark(benchmark::State& state) {
  const Tokens length = state.range(0), shard = state.range(1);
  AttentionShape shape{8, 8, 128, 0};
  shape.deterministic = state.range(2) != 0;
  const auto tasks = sharded_document(length, shard, MaskSpec::causal());
  const auto size = static_cast<std::size_t>(length) * shape.q_heads * shape.head_dim;
  Rng rng(12345);
  auto random = [&] {
    std::vector<float> x(size);
    for (auto& value : x) value = static_cast<float>(rng.normal());
    return x;
  };
  const auto q = random(), k = random(), v = random(), d_o = random();
  std::vector<float> o(size), lse(static_cast<std::size_t>(length) * shape.q_heads), dq(size), dk(size), dv(size);
  auto view = [&](auto& x) { return HeadTensor<std::remove_reference_t<decltype(x[0])>>{x.data(), length, 8, 128}; };
  attention_forward<float>(tasks, shape, view(q), view(k), view(v), view(o), {lse.data(), length, 8, 1});
  for (auto _ : state) {
    attention_backward<float>(tasks, shape, view(q), view(k), view(v), view(o), view(d_o), {lse.data(), length, 8, 1},
                              view(dq), view(dk), view(dv));
    benchmark::DoNotOptimize(dk.data());
  }
  state.counters["tasks"] = static_cast<double>(tasks.size());
  state.counters["GFLOP/s"] = benchmark::Counter(forward_flops(tasks, shape) * kBackwardFlopsFactor / 1e9,
                                                 benchmark::Counter::kIsIterationInvariantRate);
}

BENCHMARK(backward_benchmark)
    ->ArgNames({"length", "shard", "deterministic"})
    ->ArgsProduct({{4096}, {4096, 512, 128}, {0, 1}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
}  // namespace fulcrum::kernels

BENCHMARK_MAIN();

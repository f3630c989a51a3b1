#include "fulcrum/report/kernel_bench.hpp"

#include "fulcrum/core/error.hpp"
#include "fulcrum/report/table.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <omp.h>

namespace fulcrum {

void KernelBenchConfig::validate() const {
  shape.validate();
  kernels::parse_dtype(dtype);
  MaskSpec::parse(mask);
  if (repeats < 1) fail("repeats = {}: must be >= 1", repeats);
  for (Tokens l : lengths) {
    if (l < 1) fail("lengths: {} must be >= 1", l);
  }
  if (split_length < 0) fail("split-length = {}: must be >= 0 (0 skips the shard study)", split_length);
  for (Tokens s : shards) {
    if (s < 1) fail("shards: {} must be >= 1", s);
  }
}

KernelBench run_kernel_bench(const KernelBenchConfig& config) {
  config.validate();
  KernelBench bench;
  bench.config = config;
  bench.threads = omp_get_max_threads();
  // The roofline is measured before and after the kernels and the higher kept: on a shared machine a
  // single low reading would flatter every percentage.
  bench.peak_flops = kernels::measure_fma_peak();
  const auto dtype = kernels::parse_dtype(config.dtype);
  const MaskSpec mask = MaskSpec::parse(config.mask);
  auto record = [&](const char* study, Tokens length, Tokens shard, bool backward) {
    const auto tasks = kernels::sharded_document(length, shard, mask);
    const auto t = kernels::time_attention(tasks, config.shape, length, length, dtype, config.repeats, backward);
    const int n = static_cast<int>(tasks.size());
    bench.rows.push_back({study, "forward", length, shard, n, t.forward_s, t.forward_flops});
    if (backward) bench.rows.push_back({study, "backward", length, shard, n, t.backward_s, t.backward_flops});
  };
  for (Tokens length : config.lengths) record("length", length, length, config.backward);
  if (config.split_length > 0) {
    for (Tokens shard : config.shards) record("shards", config.split_length, shard, false);
  }
  bench.peak_flops = std::max(bench.peak_flops, kernels::measure_fma_peak());
  return bench;
}

std::string KernelBench::to_table() const {
  std::string out = fmt::format("fp32 FMA peak: {:.1f} GFLOP/s on {} threads\n", peak_flops / 1e9, threads);
  out += fmt::format("{} attention, {} q heads / {} kv heads, head dim {}, {}; median of {}\n", config.mask,
                     config.shape.q_heads, config.shape.kv_heads, config.shape.head_dim, config.dtype, config.repeats);
  Table table({"study", "pass", "length", "tasks", "seconds", "GFLOP/s", "% of peak"});
  for (const auto& r : rows) {
    const std::string what = r.study == "shards" ? fmt::format("{} x {}", r.tasks, r.shard) : std::to_string(r.length);
    table.add_row({r.study, r.pass, what, std::to_string(r.tasks), fmt::format("{:.3f}", r.seconds),
                   fmt::format("{:.1f}", r.gflops()), fmt::format("{:.1f}", 100 * r.flops / r.seconds / peak_flops)});
  }
  return out + table.to_string();
}

nlohmann::json KernelBench::to_json() const {
  nlohmann::json j = {{"peak_flops", peak_flops},
                      {"threads", threads},
                      {"mask", config.mask},
                      {"dtype", config.dtype},
                      {"q_heads", config.shape.q_heads},
                      {"kv_heads", config.shape.kv_heads},
                      {"head_dim", config.shape.head_dim},
                      {"repeats", config.repeats},
                      {"rows", nlohmann::json::array()}};
  for (const auto& r : rows) {
    j["rows"].push_back({{"study", r.study},
                         {"pass", r.pass},
                         {"length", r.length},
                         {"shard", r.shard},
                         {"tasks", r.tasks},
                         {"seconds", r.seconds},
                         {"flops", r.flops},
                         {"gflops", r.gflops()},
                         {"fraction_of_peak", r.flops / r.seconds / peak_flops}});
  }
  return j;
}

}  // namespace fulcrum

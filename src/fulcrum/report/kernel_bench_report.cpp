#include "fulcrum/report/kernel_bench_report.hpp"

#include "fulcrum/report/report_json.hpp"

#include "fulcrum/report/table.hpp"

#include <fmt/format.h>

namespace fulcrum {

std::string kernel_bench_table(const studies::KernelBench& bench) {
  const auto& config = bench.config;
  const auto& rows = bench.rows;
  const double peak_flops = bench.peak_flops;
  const int threads = bench.threads;

  std::string out = fmt::format("fp32 FMA peak: {:.1f} GFLOP/s on {} threads; kernels: {}\n", peak_flops / 1e9, threads,
                                bench.simd_path);
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

nlohmann::json kernel_bench_json(const studies::KernelBench& bench) {
  const auto& config = bench.config;
  const auto& rows = bench.rows;
  const double peak_flops = bench.peak_flops;
  const int threads = bench.threads;

  nlohmann::json j = {{"schema_version", kReportSchemaVersion},
                      {"peak_flops", peak_flops},
                      {"threads", threads},
                      {"simd_path", bench.simd_path},
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

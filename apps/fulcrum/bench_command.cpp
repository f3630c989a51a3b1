// `fulcrum bench kernels`: GFLOP/s and percent of this machine's FMA peak of the CPU kernels.
// `fulcrum bench comm`: latency and bandwidth between two MPI ranks, and memcpy bandwidth.
#include "commands.hpp"

#include "fulcrum/core/error.hpp"
#include "fulcrum/report/kernel_bench_report.hpp"
#include "fulcrum/report/report_json.hpp"
#include "fulcrum/report/table.hpp"
#include "fulcrum/runtime/link_bench.hpp"
#include "fulcrum/runtime/mpi_communicator.hpp"
#include "job_session.hpp"
#include "outputs.hpp"
#include "verbosity.hpp"

#include <fmt/format.h>

#include <memory>
#include <vector>

namespace fulcrum::cli {

Action add_bench_command(CLI::App& app) {
  auto* bench = app.add_subcommand("bench", "Measure Fulcrum's components on this machine");
  bench->require_subcommand(1);
  auto* cmd = bench->add_subcommand("kernels", "GFLOP/s and % of FMA peak of the CPU attention kernels");
  auto config = std::make_shared<studies::KernelBenchConfig>();
  auto json_path = std::make_shared<std::string>();
  auto no_backward = std::make_shared<bool>(false);
  cmd->add_option("--lengths", config->lengths, "document lengths to time")->delimiter(',')->capture_default_str();
  cmd->add_option("--q-heads", config->shape.q_heads, "query heads")->capture_default_str()->check(kHeadCount);
  cmd->add_option("--kv-heads", config->shape.kv_heads, "key/value heads (GQA)")
      ->capture_default_str()
      ->check(kHeadCount);
  cmd->add_option("--head-dim", config->shape.head_dim, "head dimension")->capture_default_str()->check(kHeadDim);
  cmd->add_option("--mask", config->mask, "any mask of `fulcrum plan --mask`")->capture_default_str();
  cmd->add_option("--dtype", config->dtype, "fp32 | bf16 storage")->capture_default_str();
  cmd->add_option("--repeats", config->repeats, "timed repeats; the median is reported")->capture_default_str();
  cmd->add_option("--split-length", config->split_length, "document cut into shards (0 skips that study)")
      ->capture_default_str();
  cmd->add_option("--shards", config->shards, "shard sizes for the split study")->delimiter(',')->capture_default_str();
  auto full = std::make_shared<bool>(false);
  cmd->add_flag("--full", *full,
                "the full grid of docs/performance.md: lengths 4096,16384,32768 and a 32768-token document split "
                "into shards of 32768,4096,512,128 (minutes on a small CPU); --lengths, --split-length and --shards "
                "given as well still win");
  cmd->add_flag("--no-backward", *no_backward, "time the forward pass only");
  cmd->add_option(
         "--simd", config->simd,
         "the kernels' ISA version: auto (FULCRUM_SIMD, else the best this CPU runs) | avx512 | avx2 | baseline")
      ->capture_default_str();
  add_output_option(*cmd, "json", *json_path, "also write the results as JSON to this path");
  return [cmd, config, json_path, no_backward, full] {
    if (!json_path->empty()) check_output_file("json", *json_path);
    if (*full) {
      const studies::KernelBenchConfig given = *config;
      config->use_full_grid();
      if (cmd->count("--lengths") > 0) config->lengths = given.lengths;
      if (cmd->count("--split-length") > 0) config->split_length = given.split_length;
      if (cmd->count("--shards") > 0) config->shards = given.shards;
    }
    config->backward = !*no_backward;
    const auto result = studies::run_kernel_bench(*config, [](int done, int total) {
      show_progress(fmt::format("bench kernels: {}/{} cells", done, total), done == total);
    });
    fmt::print("{}", kernel_bench_table(result));
    if (!json_path->empty()) write_output_json("json", *json_path, kernel_bench_json(result));
    return 0;
  };
}

Action add_bench_comm_command(CLI::App& app) {
  auto* cmd = app.get_subcommand("bench")->add_subcommand("comm", "Latency and bandwidth between two MPI ranks");
  auto sizes =
      std::make_shared<std::vector<std::size_t>>(std::vector<std::size_t>{8, 1024, 65536, 1 << 20, 16 << 20, 64 << 20});
  auto repeats = std::make_shared<int>(20);
  auto json_path = std::make_shared<std::string>();
  cmd->add_option("--sizes", *sizes, "message sizes in bytes")->delimiter(',')->capture_default_str();
  cmd->add_option("--repeats", *repeats, "round trips per size; the median is reported")->capture_default_str();
  add_output_option(*cmd, "json", *json_path, "also write the results as JSON to this path");
  return [sizes, repeats, json_path] {
    if (*repeats < 1 || *repeats > 100000) fail("repeats = {}: must be in [1, 100000]", *repeats);
    // Each size is a buffer on both ranks, sent `repeats` times: a stated bound, as for every cost.
    constexpr std::size_t kMaxMessageBytes = std::size_t{1} << 30;
    for (const std::size_t bytes : *sizes) {
      if (bytes < 1 || bytes > kMaxMessageBytes) fail("sizes: {} must be in [1, {}] bytes", bytes, kMaxMessageBytes);
    }
    if (!json_path->empty()) check_output_file("json", *json_path);
    if (!started_by_mpiexec()) return relaunch_under_mpiexec(2);
    runtime::MpiSession session;
    runtime::MpiCommunicator comm;
    const auto m = runtime::measure_link(comm, *sizes, *repeats);
    if (comm.rank() != 0) return 0;
    Table t({"bytes", "one-way us", "GB/s"});
    for (const auto& s : m.samples) {
      t.add_row({std::to_string(s.bytes), fmt::format("{:.2f}", 1e6 * s.one_way_s),
                 fmt::format("{:.2f}", static_cast<double>(s.bytes) / s.one_way_s / 1e9)});
    }
    fmt::print("{}latency {:.2f} us, bandwidth {:.2f} GB/s, memcpy {:.2f} GB/s (read + write)\n", t.to_string(),
               1e6 * m.latency_s, m.bandwidth_bytes_per_s / 1e9, m.memcpy_bytes_per_s / 1e9);
    if (!json_path->empty()) {
      nlohmann::json samples = nlohmann::json::array();
      for (const auto& s : m.samples) samples.push_back({{"bytes", s.bytes}, {"one_way_s", s.one_way_s}});
      write_output_json("json", *json_path,
                        {{"schema_version", kReportSchemaVersion},
                         {"samples", samples},
                         {"latency_s", m.latency_s},
                         {"bandwidth_bytes_per_s", m.bandwidth_bytes_per_s},
                         {"memcpy_bytes_per_s", m.memcpy_bytes_per_s}});
    }
    return 0;
  };
}

}  // namespace fulcrum::cli

// `fulcrum bench kernels`: GFLOP/s and percent of this machine's FMA peak of the CPU kernels.
#include "commands.hpp"

#include "fulcrum/report/kernel_bench.hpp"
#include "json_output.hpp"

#include <fmt/format.h>

#include <memory>

namespace fulcrum::cli {

Action add_bench_command(CLI::App& app) {
  auto* bench = app.add_subcommand("bench", "Measure Fulcrum's components on this machine");
  bench->require_subcommand(1);
  auto* cmd = bench->add_subcommand("kernels", "GFLOP/s and % of FMA peak of the CPU attention kernels");
  auto config = std::make_shared<KernelBenchConfig>();
  auto json_path = std::make_shared<std::string>();
  auto no_backward = std::make_shared<bool>(false);
  cmd->add_option("--lengths", config->lengths, "document lengths to time")->delimiter(',')->capture_default_str();
  cmd->add_option("--q-heads", config->shape.q_heads, "query heads")->capture_default_str();
  cmd->add_option("--kv-heads", config->shape.kv_heads, "key/value heads (GQA)")->capture_default_str();
  cmd->add_option("--head-dim", config->shape.head_dim, "head dimension")->capture_default_str();
  cmd->add_option("--mask", config->mask, "any mask of `fulcrum plan --mask`")->capture_default_str();
  cmd->add_option("--dtype", config->dtype, "fp32 | bf16 storage")->capture_default_str();
  cmd->add_option("--repeats", config->repeats, "timed repeats; the median is reported")->capture_default_str();
  cmd->add_option("--split-length", config->split_length, "document cut into shards (0 skips that study)")
      ->capture_default_str();
  cmd->add_option("--shards", config->shards, "shard sizes for the split study")->delimiter(',')->capture_default_str();
  cmd->add_flag("--no-backward", *no_backward, "time the forward pass only");
  cmd->add_option("--json", *json_path, "also write the results as JSON to this path");
  return [config, json_path, no_backward] {
    config->backward = !*no_backward;
    const auto result = run_kernel_bench(*config);
    fmt::print("{}", result.to_table());
    if (!json_path->empty()) write_json(*json_path, result.to_json());
    return 0;
  };
}

}  // namespace fulcrum::cli

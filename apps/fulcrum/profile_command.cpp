// `fulcrum profile`: measure the CPU kernels over a grid of shard shapes and write the ProfileTable; with
// --heads, FlexAttn's runtime profile of one head per pattern key (profile_heads.hpp).
#include "commands.hpp"

#include "fulcrum/kernels/profile.hpp"
#include "fulcrum/report/table.hpp"
#include "option_aliases.hpp"
#include "outputs.hpp"
#include "profile_heads.hpp"
#include "verbosity.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <omp.h>

#include <cstdio>
#include <memory>

namespace fulcrum::cli {
namespace {

std::string grid_table(const char* pass, const ThroughputGrid& grid) {
  std::vector<std::string> header = {fmt::format("{} GFLOP/s: q \\ k", pass)};
  for (Tokens k : grid.key_lengths) header.push_back(std::to_string(k));
  Table table(header);
  for (std::size_t i = 0; i < grid.query_lengths.size(); ++i) {
    std::vector<std::string> row = {std::to_string(grid.query_lengths[i])};
    for (std::size_t j = 0; j < grid.key_lengths.size(); ++j) {
      row.push_back(fmt::format("{:.1f}", grid.flops_per_s[i * grid.key_lengths.size() + j] / 1e9));
    }
    table.add_row(row);
  }
  return table.to_string();
}

}  // namespace

Action add_profile_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("profile",
                                 "Measure the CPU kernels per shard shape; write the cost model's ProfileTable "
                                 "(--heads: FlexAttn's head profile)");
  auto config = std::make_shared<kernels::ProfileConfig>();
  auto out = std::make_shared<std::string>();
  auto dtype = std::make_shared<std::string>("fp32");
  auto heads = std::make_shared<bool>(false);
  auto heads_args = std::make_shared<ProfileHeadsArgs>();
  auto* heads_flag = cmd->add_flag("--heads", *heads,
                                   "FlexAttn's runtime profile: one head's attention per pattern key and the per-head "
                                   "projections over prompt lengths (the JSON `heads --profile` reads)");
  // The shard-grid options mean nothing with --heads (the model gives the head shape): refused together.
  for (auto* option :
       {cmd->add_option("--query-lengths", config->query_lengths, "query rows per shard")
            ->delimiter(',')
            ->capture_default_str(),
        cmd->add_option("--key-lengths", config->key_lengths, "key rows per shard")
            ->delimiter(',')
            ->capture_default_str(),
        cmd->add_option("--q-heads", config->shape.q_heads, "query heads")->capture_default_str()->check(kHeadCount),
        cmd->add_option("--kv-heads", config->shape.kv_heads, "key/value heads (GQA)")
            ->capture_default_str()
            ->check(kHeadCount),
        cmd->add_option("--head-dim", config->shape.head_dim, "head dimension")->capture_default_str()->check(kHeadDim),
        cmd->add_option("--dtype", *dtype, "fp32 | bf16 storage")->capture_default_str()}) {
    heads_flag->excludes(option);
  }
  cmd->add_option("--repeats", config->repeats, "timed repeats per cell; the median is kept")->capture_default_str();
  auto* json_option = add_output_option(
      *cmd, "json", *out, "where to write the JSON (default profile.json; heads_profile.json with --heads)");
  // The old spelling is an output option too: an empty one is refused, not read as "the default file".
  deprecate(add_output_option(*cmd, "out", *out, "deprecated: --json"), json_option);
  add_profile_heads_options(*cmd, *heads_args, heads_flag);
  return [config, out, dtype, heads, heads_args] {
    if (out->empty()) *out = *heads ? "heads_profile.json" : "profile.json";
    check_output_file("json", *out);
    if (*heads) return run_profile_heads(*heads_args, config->repeats, *out);
    config->dtype = kernels::parse_dtype(*dtype);
    const auto [table, overheads] = kernels::profile_attention(*config, [](int done, int total) {
      show_progress(fmt::format("profiling {}/{} shapes", done, total), done == total);
    });
    fmt::print("{}\n{}", grid_table("forward", table.forward()), grid_table("backward", table.backward()));
    fmt::print(
        "fixed costs (one-token documents): forward {:.2f} us per call + {:.2f} us per item, backward {:.2f} us "
        "per call + {:.2f} us per item\n",
        1e6 * overheads.call_s, 1e6 * overheads.item_s, 1e6 * overheads.backward_call_s,
        1e6 * overheads.backward_item_s);
    nlohmann::json json = table.to_json();
    json["overheads"] = overheads.to_json();
    json["measured_with"] = {{"q_heads", config->shape.q_heads},   {"kv_heads", config->shape.kv_heads},
                             {"head_dim", config->shape.head_dim}, {"dtype", *dtype},
                             {"threads", omp_get_max_threads()},   {"repeats", config->repeats}};
    write_output_json("json", *out, json);
    fmt::print("wrote {}\n", *out);
    return 0;
  };
}

}  // namespace fulcrum::cli

// `fulcrum plan`: plan seeded batches with several planners and compare balance and traffic.
#include "commands.hpp"

#include "fulcrum/core/error.hpp"
#include "fulcrum/core/text.hpp"
#include "fulcrum/report/plan_comparison_report.hpp"
#include "fulcrum/workload/mask.hpp"
#include "outputs.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <memory>

namespace fulcrum::cli {

Action add_plan_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("plan", "Plan batches with DistCA and the baselines; compare balance and traffic");
  auto config = std::make_shared<studies::PlanConfig>();
  auto json_path = std::make_shared<std::string>();
  auto planners = std::make_shared<std::string>("distca,packed,perdoc-cp,wlb");
  auto candidates = std::make_shared<std::string>();
  cmd->add_option("--dataset", config->dataset, "pretrain | prolong | uniform:MIN:MAX | lognormal:MU:SIGMA | file:PATH")
      ->capture_default_str();
  add_model_option(*cmd, config->model, "heads, head dim and dtype size the traffic");
  cmd->add_option("--mask", config->mask, mask_syntax_list(" | "))->capture_default_str();
  cmd->add_option("--ranks", config->ranks, "attention servers (= ranks)")->capture_default_str();
  cmd->add_option("--tokens-per-rank", config->tokens_per_rank, "tokens each rank holds after packing")
      ->capture_default_str();
  cmd->add_option("--batches", config->batches, "batches to draw and plan")->capture_default_str();
  cmd->add_option("--seed", config->seed, "seed of the length source")->capture_default_str();
  cmd->add_option("--planners", *planners, "comma-separated: " + planner_list())->capture_default_str();
  add_auto_options(*cmd, *candidates, &config->hardware);
  add_planner_flags(*cmd, config->options);
  add_topology_flags(*cmd, config->options);
  add_boundary_split_option(*cmd, config->boundary_split);
  add_output_option(*cmd, "json", *json_path, "also write the results as JSON to this path");
  return [cmd, config, json_path, planners, candidates] {
    if (!json_path->empty()) check_output_file("json", *json_path);
    config->planners = split_names(*planners, "planners");
    warn_unread_planner_flags(*cmd, config->planners);
    config->candidates = auto_candidates(*planners, *candidates);
    const auto comparison = studies::compare_planners(*config);
    fmt::print("{}", plan_comparison_table(comparison));
    fmt::print("packed_imbalance (the batches as packed, before planning): {:.3f}\n", comparison.packed_imbalance);
    if (!json_path->empty()) write_output_json("json", *json_path, plan_comparison_json(comparison));
    for (const auto& p : comparison.planners) {
      if (!p.valid) return 1;
    }
    return 0;
  };
}

}  // namespace fulcrum::cli

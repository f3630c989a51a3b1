#include "fulcrum/report/plan_comparison_report.hpp"

#include "fulcrum/report/auto_choice_report.hpp"
#include "fulcrum/report/report_json.hpp"
#include "fulcrum/report/table.hpp"

#include <fmt/format.h>

namespace fulcrum {

nlohmann::json plan_comparison_json(const studies::PlanComparison& comparison) {
  const auto& config = comparison.config;
  const auto& planners = comparison.planners;
  const double packed_imbalance = comparison.packed_imbalance;

  nlohmann::json j = report_object();
  j["config"] = {{"dataset", config.dataset},
                 {"boundary_split", to_string(config.boundary_split)},
                 {"model", config.model},
                 {"mask", config.mask},
                 {"ranks", config.ranks},
                 {"tokens_per_rank", config.tokens_per_rank},
                 {"batches", config.batches},
                 {"seed", config.seed},
                 {"devices_per_machine", config.options.devices_per_machine},
                 {"hardware", config.hardware}};
  j["config"]["options"] = planner_options_json(config.options);
  j["packed_imbalance"] = packed_imbalance;
  for (const auto& p : planners) {
    j["planners"][p.name] = {{"imbalance", p.imbalance},
                             {"memory_imbalance", p.memory_imbalance},
                             {"comm_bytes_total", p.comm_bytes_total},
                             {"comm_bytes_max_rank", p.comm_bytes_max_rank},
                             {"traffic_imbalance", p.traffic_imbalance},
                             {"remote_tokens_max_rank", p.remote_tokens_max_rank},
                             {"tasks", p.tasks},
                             {"plan_ms", p.plan_ms},
                             {"valid", p.valid}};
    if (!p.valid) j["planners"][p.name]["problem"] = p.first_problem;
    if (p.auto_choice) j["planners"][p.name]["auto"] = p.auto_choice->to_json();
  }
  return j;
}

std::string plan_comparison_table(const studies::PlanComparison& comparison) {
  const auto& config = comparison.config;
  const auto& planners = comparison.planners;

  // The columns are the JSON keys (plan_comparison_json), so a reader of either finds the other.
  Table table({"planner", "imbalance", "memory_imbalance", "comm_bytes_total", "comm_bytes_max_rank",
               "traffic_imbalance", "remote_tokens_max_rank", "tasks", "plan_ms", "valid"});
  for (const auto& p : planners) {
    table.add_row({p.name, fmt::format("{:.3f}", p.imbalance), fmt::format("{:.3f}", p.memory_imbalance),
                   format_bytes(p.comm_bytes_total), format_bytes(p.comm_bytes_max_rank),
                   fmt::format("{:.2f}", p.traffic_imbalance), fmt::format("{:.0f}", p.remote_tokens_max_rank),
                   fmt::format("{:.0f}", p.tasks), fmt::format("{:.2f}", p.plan_ms),
                   p.valid ? "yes" : "NO: " + p.first_problem});
  }
  std::string out = fmt::format(
      "{} batch(es) of {} ranks x {} tokens from '{}', model {}, mask {}; per layer, forward; means over batches "
      "(plan_ms: the median)\n{}",
      config.batches, config.ranks, config.tokens_per_rank, config.dataset, config.model, config.mask,
      table.to_string());
  for (const auto& p : planners) {
    if (!p.auto_choice) continue;
    const auto who = fmt::format("auto (one layer forward and backward of each plan on {}, a rank a GPU), per batch",
                                 config.hardware);
    for (const auto& line : auto_choice_lines(who, *p.auto_choice)) out += line + "\n";
  }
  return out;
}

}  // namespace fulcrum

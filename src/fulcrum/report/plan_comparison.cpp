#include "fulcrum/report/plan_comparison.hpp"

#include "fulcrum/core/error.hpp"
#include "fulcrum/plan/stats.hpp"
#include "fulcrum/plan/verify.hpp"
#include "fulcrum/report/table.hpp"
#include "fulcrum/workload/length_source.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>

namespace fulcrum {

void PlanConfig::validate() const {
  validate_batch_shape(ranks, tokens_per_rank);
  if (batches < 1) fail("batches = {}: must be >= 1", batches);
  if (planners.empty()) fail("planners: name at least one of distca, packed, perdoc-cp, wlb");
  auto opts = options;
  opts.model = model_shape_preset(model);
  opts.validate(tokens_per_rank);
  MaskSpec::parse(mask);
  for (const auto& p : planners) make_planner(p, opts);  // rejects unknown names
}

PlanComparison compare_planners(const PlanConfig& config) {
  config.validate();
  PlannerOptions options = config.options;
  options.model = model_shape_preset(config.model);
  const MaskSpec mask = MaskSpec::parse(config.mask);

  auto source = make_length_source(config.dataset, config.seed, config.tokens_per_rank);
  BatchStream stream([&] { return source->next(); }, config.ranks, config.tokens_per_rank, mask);
  std::vector<Batch> batches;
  batches.reserve(static_cast<std::size_t>(std::max(config.batches, 0)));
  for (int b = 0; b < config.batches; ++b) batches.push_back(stream.next());

  PlanComparison out;
  out.config = config;
  auto packed = make_planner("packed", options);
  for (const auto& batch : batches) out.packed_imbalance += compute_stats(packed->plan(batch), options.model).imbalance;
  out.packed_imbalance /= static_cast<double>(batches.size());

  for (const auto& name : config.planners) {
    auto planner = make_planner(name, options);
    PlannerSummary summary;
    summary.name = name;
    std::vector<double> times;
    for (const auto& batch : batches) {
      const auto start = std::chrono::steady_clock::now();
      const Assignment a = planner->plan(batch);
      times.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
      const auto report = planner->capabilities().keeps_documents ? verify(a, batch) : verify(a);
      if (!report.ok() && summary.valid) {
        summary.valid = false;
        summary.first_problem = report.errors.front();
      }
      const auto stats = compute_stats(a, options.model);
      summary.imbalance += stats.imbalance;
      summary.memory_imbalance += stats.memory_imbalance;
      summary.comm_bytes_total += stats.comm_bytes_total;
      summary.comm_bytes_max_rank += stats.comm_bytes_max_rank;
      summary.remote_tokens_max_rank += stats.remote_tokens_max_rank;
      summary.tasks += static_cast<double>(stats.tasks);
    }
    const auto n = static_cast<double>(batches.size());
    summary.imbalance /= n;
    summary.memory_imbalance /= n;
    summary.comm_bytes_total /= n;
    summary.comm_bytes_max_rank /= n;
    summary.remote_tokens_max_rank /= n;
    summary.tasks /= n;
    std::sort(times.begin(), times.end());
    summary.plan_ms = times[times.size() / 2];
    out.planners.push_back(summary);
  }
  return out;
}

nlohmann::json PlanComparison::to_json() const {
  nlohmann::json j;
  j["config"] = {{"dataset", config.dataset},
                 {"model", config.model},
                 {"mask", config.mask},
                 {"ranks", config.ranks},
                 {"tokens_per_rank", config.tokens_per_rank},
                 {"batches", config.batches},
                 {"seed", config.seed},
                 {"tolerance", config.options.tolerance},
                 {"granularity", config.options.granularity},
                 {"cp_degree", config.options.cp_degree},
                 {"wlb_token_cap", config.options.wlb_token_cap}};
  j["packed_imbalance"] = packed_imbalance;
  for (const auto& p : planners) {
    j["planners"][p.name] = {{"imbalance", p.imbalance},
                             {"memory_imbalance", p.memory_imbalance},
                             {"comm_bytes_total", p.comm_bytes_total},
                             {"comm_bytes_max_rank", p.comm_bytes_max_rank},
                             {"remote_tokens_max_rank", p.remote_tokens_max_rank},
                             {"tasks", p.tasks},
                             {"plan_ms", p.plan_ms},
                             {"valid", p.valid}};
    if (!p.valid) j["planners"][p.name]["problem"] = p.first_problem;
  }
  return j;
}

std::string PlanComparison::to_table() const {
  Table table({"planner", "imbalance", "mem imbalance", "traffic total", "traffic max rank", "remote tokens", "tasks", "plan ms",
               "verifier"});
  for (const auto& p : planners) {
    table.add_row({p.name, fmt::format("{:.3f}", p.imbalance), fmt::format("{:.3f}", p.memory_imbalance),
                   format_bytes(p.comm_bytes_total), format_bytes(p.comm_bytes_max_rank),
                   fmt::format("{:.0f}", p.remote_tokens_max_rank), fmt::format("{:.0f}", p.tasks),
                   fmt::format("{:.2f}", p.plan_ms), p.valid ? "valid" : "INVALID: " + p.first_problem});
  }
  return fmt::format("{} batch(es) of {} ranks x {} tokens from '{}', model {}, mask {}; per layer, forward\n{}",
                     config.batches, config.ranks, config.tokens_per_rank, config.dataset, config.model, config.mask,
                     table.to_string());
}

}  // namespace fulcrum

#include "fulcrum/studies/plan_comparison.hpp"

#include "fulcrum/core/error.hpp"
#include "fulcrum/plan/stats.hpp"
#include "fulcrum/plan/verify.hpp"
#include "fulcrum/workload/head_masks.hpp"
#include "fulcrum/workload/length_source.hpp"
#include "fulcrum/workload/model_config.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <numeric>
#include <optional>

namespace fulcrum::studies {

void PlanConfig::validate() const {
  validate_batch_shape(ranks, tokens_per_rank);
  if (batches < 1) fail("batches = {}: must be >= 1", batches);
  if (planners.empty()) fail("planners: name at least one");
  MaskSpec::parse(mask);
  for (const auto& p : planners) {
    check_selectable_planner(p);
    if (!is_meta_planner(p)) make_planner(p, planner_options());  // checks the options it reads
  }
  sim::check_candidates_need_auto(planners, candidates);
  if (names_meta_planner(planners)) {
    sim::check_auto_inputs(candidates, hardware);
  }
}

PlannerOptions PlanConfig::planner_options() const {
  PlannerOptions o = options;
  o.model = resolve_model_shape(model);
  return o;
}

namespace {

// The batches every planner plans: drawn once, so all plan the same ones.
std::vector<Batch> draw_batches(const PlanConfig& config, const MaskSpec& mask) {
  auto source = make_length_source(config.dataset, config.seed, config.tokens_per_rank);
  BatchStream stream([&] { return source->next(); }, config.ranks, config.tokens_per_rank, mask, config.boundary_split);
  std::vector<Batch> batches;
  batches.reserve(static_cast<std::size_t>(std::max(config.batches, 0)));
  for (int b = 0; b < config.batches; ++b) batches.push_back(stream.next());
  Tokens longest = 0;
  for (const auto& batch : batches) {
    for (const auto& d : batch.documents) longest = std::max(longest, d.length);
  }
  check_mask_reach(mask, longest, "mask");
  return batches;
}

// The planners, in the config's order (null for auto). Every planner checks every batch before any
// plans: a refusal (a batch beyond a planner's size) comes before the work, not after the other
// planners'. (auto's candidates sit out what they refuse.)
std::vector<std::unique_ptr<Planner>> make_checked_planners(const PlanConfig& config, const PlannerOptions& options,
                                                            const std::vector<Batch>& batches) {
  std::vector<std::unique_ptr<Planner>> planners;
  for (const auto& name : config.planners) {
    if (is_meta_planner(name)) {
      planners.emplace_back();
      continue;
    }
    planners.push_back(make_planner(name, options));
    for (const auto& batch : batches) planners.back()->check_batch(batch);
  }
  return planners;
}

void add_stats(PlannerSummary& summary, const AssignmentStats& stats) {
  summary.imbalance += stats.imbalance;
  summary.memory_imbalance += stats.memory_imbalance;
  summary.comm_bytes_total += stats.comm_bytes_total;
  summary.comm_bytes_max_rank += stats.comm_bytes_max_rank;
  summary.remote_tokens_max_rank += stats.remote_tokens_max_rank;
  summary.traffic_imbalance += stats.traffic_imbalance;
  summary.tasks += static_cast<double>(stats.tasks);
}

// The sums of add_stats over n batches into means.
void average_stats(PlannerSummary& summary, double n) {
  summary.imbalance /= n;
  summary.memory_imbalance /= n;
  summary.comm_bytes_total /= n;
  summary.comm_bytes_max_rank /= n;
  summary.remote_tokens_max_rank /= n;
  summary.traffic_imbalance /= n;
  summary.tasks /= n;
}

// One planner (null: auto, simulating on `setup`) over every batch: whether every plan verifies (else the
// first problem), the plans' stats averaged over the batches, and the median planning time.
PlannerSummary summarise_planner(const std::string& name, Planner* planner, const std::vector<Batch>& batches,
                                 const PlanConfig& config, const PlannerOptions& options,
                                 const std::optional<sim::LayerSetup>& setup) {
  PlannerSummary summary;
  summary.name = name;
  std::vector<double> times;
  for (const auto& batch : batches) {
    Assignment a;
    if (planner) {
      const auto start = std::chrono::steady_clock::now();
      a = planner->plan(batch);
      times.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
    } else {
      sim::BatchChoice choice = sim::choose_plan(batch, config.candidates, options, *setup);
      times.push_back(1e3 * std::accumulate(choice.planning_s.begin(), choice.planning_s.end(), 0.0));
      if (!summary.auto_choice) summary.auto_choice.emplace();
      summary.auto_choice->record(choice);
      a = std::move(choice.assignment);
    }
    const auto report = !planner || planner->capabilities().keeps_documents ? verify(a, batch) : verify(a);
    if (!report.ok() && summary.valid) {
      summary.valid = false;
      summary.first_problem = report.errors.front();
    }
    add_stats(summary, compute_stats(a, options.model));
  }
  average_stats(summary, static_cast<double>(batches.size()));
  std::sort(times.begin(), times.end());
  summary.plan_ms = times[times.size() / 2];
  return summary;
}

}  // namespace

PlanComparison compare_planners(const PlanConfig& config) {
  config.validate();
  const PlannerOptions options = config.planner_options();
  const MaskSpec mask = MaskSpec::parse(config.mask);
  const std::vector<Batch> batches = draw_batches(config, mask);

  PlanComparison out;
  out.config = config;
  for (const auto& batch : batches) out.packed_imbalance += placement_imbalance(batch, options.model);
  out.packed_imbalance /= static_cast<double>(batches.size());

  const std::vector<std::unique_ptr<Planner>> planners = make_checked_planners(config, options, batches);
  // auto's simulated layer (the hardware is read only when auto runs).
  std::optional<sim::LayerSetup> setup;
  if (names_meta_planner(config.planners)) {
    setup = sim::gpu_per_rank(options.model, config.hardware, CommMode::kPingPong);
  }
  for (std::size_t p = 0; p < planners.size(); ++p) {
    out.planners.push_back(summarise_planner(config.planners[p], planners[p].get(), batches, config, options, setup));
  }
  return out;
}

}  // namespace fulcrum::studies

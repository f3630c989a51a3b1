#include "fulcrum/sim/auto_choice.hpp"

#include "fulcrum/core/error.hpp"
#include "fulcrum/cost/hardware_model.hpp"
#include "fulcrum/sim/parallel.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <numeric>

namespace fulcrum::sim {

namespace {

bool can_be_candidate(const PlannerCapabilities& caps, AutoScope scope) {
  return caps.keeps_documents || (scope == AutoScope::kRun && caps.defers_documents);
}

}  // namespace

std::vector<std::string> default_auto_candidates(AutoScope scope) {
  std::vector<std::string> names;
  for (const auto& r : planner_registry()) {
    if (can_be_candidate(r.capabilities, scope)) names.emplace_back(r.name);
  }
  return names;
}

void check_auto_candidates(const std::vector<std::string>& candidates, AutoScope scope) {
  const auto known = planner_names();
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    if (std::find(known.begin(), known.end(), candidates[i]) == known.end()) {
      fail("candidates: '{}' is not a planner; choose from {}", candidates[i], fmt::join(known, ", "));
    }
    const PlannerCapabilities& caps = find_planner(candidates[i]).capabilities;
    if (!can_be_candidate(caps, scope)) {
      if (caps.defers_documents) {
        fail(
            "candidates: {} defers documents to later batches, so auto cannot choose it batch by batch (only "
            "simulate, which keeps its queue between iterations)",
            candidates[i]);
      }
      fail(
          "candidates: {} does not compute exactly the batch it is given (it re-lays out documents), so auto "
          "cannot choose it",
          candidates[i]);
    }
    if (std::find(candidates.begin(), candidates.begin() + static_cast<std::ptrdiff_t>(i), candidates[i]) !=
        candidates.begin() + static_cast<std::ptrdiff_t>(i)) {
      fail("candidates: {} is given twice", candidates[i]);
    }
  }
}

void check_candidates_need_auto(const std::vector<std::string>& planners, const std::vector<std::string>& candidates) {
  if (!candidates.empty() && !names_meta_planner(planners)) {
    fail("candidates: only auto has candidates; add auto to --planners");
  }
}

void check_auto_inputs(const std::vector<std::string>& candidates, const std::string& hardware) {
  check_auto_candidates(candidates, AutoScope::kBatch);
  (void)load_hardware(hardware);
}

LayerSetup gpu_per_rank(const ModelShape& model, const std::string& hardware, CommMode mode) {
  const HardwareModel gpu = load_hardware(hardware);
  return {model, gpu, tp_group_hardware(gpu, 1), 1, mode};
}

std::vector<std::size_t> fastest_first(const std::vector<double>& seconds) {
  std::vector<std::size_t> order(seconds.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return seconds[a] < seconds[b]; });
  return order;
}

double AutoChoice::total_planning_s() const { return std::accumulate(planning_s.begin(), planning_s.end(), 0.0); }

void AutoChoice::record(const BatchChoice& choice) {
  if (candidates.empty()) {
    candidates = choice.candidates;
    planning_s.assign(candidates.size(), 0);
  }
  FULCRUM_CHECK(choice.candidates == candidates, "auto: a batch compared other candidates than the run's");
  chosen.push_back(choice.chosen);
  runner_up.push_back(choice.runner_up);
  runner_up_ratio.push_back(choice.runner_up.empty() || choice.chosen_s <= 0 ? 0
                                                                             : choice.runner_up_s / choice.chosen_s);
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    planning_s[i] += choice.planning_s[i];
    if (candidates[i] == choice.chosen) chosen_planning_s += choice.planning_s[i];
  }
  for (const auto& why : choice.refused) {
    const auto name = why.substr(0, why.find(':'));
    const bool listed = std::any_of(refused.begin(), refused.end(),
                                    [&](const std::string& r) { return r.substr(0, r.find(':')) == name; });
    if (!listed) refused.push_back(why);
  }
  simulating_s += choice.simulating_s;
}

nlohmann::json AutoChoice::to_json() const {
  return {{"candidates", candidates},
          {"chosen", chosen},
          {"runner_up", runner_up},
          {"runner_up_ratio", runner_up_ratio},
          {"refused", refused},
          {"planning_s", total_planning_s()},
          {"candidate_planning_s", planning_s},
          {"chosen_planning_s", chosen_planning_s},
          {"simulating_s", simulating_s}};
}

BatchChoice choose_plan(const Batch& batch, std::vector<std::string> candidates, const PlannerOptions& options,
                        const LayerSetup& setup, CommMode baseline_mode) {
  if (candidates.empty()) candidates = default_auto_candidates(AutoScope::kBatch);
  check_auto_candidates(candidates, AutoScope::kBatch);
  BatchChoice out;
  out.assignment = choose_fastest(
      candidates,
      [&](std::size_t i) {
        const auto planner = make_planner(candidates[i], options);
        const auto start = std::chrono::steady_clock::now();
        CandidateRun<Assignment> tried{plan_verified(*planner, batch), 0, 0};
        tried.planning_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        LayerSetup own = setup;
        if (own.mode == CommMode::kSignal) own.mode = CommMode::kPingPong;
        if (!planner->capabilities().overlaps_traffic) own.mode = baseline_mode;
        // A layer in steady state (the whole-layer schedule's, for ping-pong), as training runs many.
        tried.seconds = simulate_pass(tried.result, own, Pass::kForward).steady_makespan_s +
                        simulate_pass(tried.result, own, Pass::kBackward).steady_makespan_s;
        return tried;
      },
      out);
  return out;
}

}  // namespace fulcrum::sim

// `auto`: choosing a strategy per batch by simulated time. Every candidate planner plans the batch, its
// plan runs on the simulator, and the fastest one is the choice. `fulcrum plan` and Python's choose_plan
// choose per batch here (one layer, forward and backward, on sim/layer); `fulcrum simulate` chooses per
// iteration, over its micro-batches and pipeline schedule (training.cpp), with the same candidates and
// ranking.
#pragma once

#include "fulcrum/core/error.hpp"
#include "fulcrum/plan/assignment.hpp"
#include "fulcrum/planners/planner.hpp"
#include "fulcrum/sim/layer.hpp"

#include <nlohmann/json_fwd.hpp>

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace fulcrum::sim {

/// The name that stands for the choice, wherever a planner is named.
inline constexpr std::string_view kAutoSystem = "auto";

/// The default candidates: every registered planner that computes exactly its batch's documents. A planner
/// that defers documents (wlb) cannot be chosen batch by batch: what it holds back would be lost when
/// another planner takes the next batch.
std::vector<std::string> default_auto_candidates();

/// Bad input naming `candidates`: an unknown planner, one that does not compute exactly its batch, or a name
/// given twice.
void check_auto_candidates(const std::vector<std::string>& candidates);

/// Indices of `seconds`, fastest first; on a tie the one listed first.
std::vector<std::size_t> fastest_first(const std::vector<double>& seconds);

/// Runs `work` (a candidate planning, or planning and simulating): a bad-input Error, the candidate refusing
/// the batch (a mask it does not plan, a size past its limits), is written to `why` ("name: message") and
/// gives nullopt, so that candidate sits the batch out; any other error propagates.
template <class Work>
auto unless_refused(const std::string& name, std::string& why, Work&& work) -> std::optional<decltype(work())> {
  try {
    return work();
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::kBadInput) throw;
    why = name + ": " + e.what();
    return std::nullopt;
  }
}

struct BatchChoice {
  Assignment assignment;                 // the chosen candidate's plan, verified (choose_plan only)
  std::string chosen, runner_up;         // runner_up is empty when one candidate planned the batch
  double chosen_s = 0, runner_up_s = 0;  // simulated: one layer forward + backward, or an iteration
  std::vector<std::string> candidates;
  std::vector<double> planning_s;    // per candidate, wall seconds (0 for one that refused the batch)
  std::vector<std::string> refused;  // "name: why" for each candidate that refused it
  double simulating_s = 0;           // wall seconds simulating the candidates' plans
};

/// What auto chose over a run, batch by batch (plan) or iteration by iteration (simulate), and what the
/// choosing cost.
struct AutoChoice {
  std::vector<std::string> candidates;         // those compared
  std::vector<std::string> chosen, runner_up;  // per batch or iteration (runner_up empty when one candidate ran)
  std::vector<double> runner_up_ratio;         // the runner-up's time over the chosen one's (0 without one)
  std::vector<std::string> refused;            // "name: why": a candidate that sat out a batch (its first refusal)
  std::vector<double> planning_s;              // per candidate, wall seconds planning over the whole run
  double chosen_planning_s = 0;  // planning the plans that were chosen (what one planner alone would take)
  double simulating_s = 0;       // simulating every candidate's plans to compare them
  double total_planning_s() const;
  /// Adds one batch's choice (its candidates must be this run's).
  void record(const BatchChoice& choice);
  nlohmann::json to_json() const;
};

/// Plans `batch` with each candidate (empty: the defaults) under `options`, and simulates one layer of each
/// plan on `setup`: the candidates that overlap their own traffic in setup.mode (ping-pong when it is
/// signal: 1-byte messages would favour them), the others in `baseline_mode`. Fails (bad input) when no
/// candidate plans the batch, naming each one's reason.
BatchChoice choose_plan(const Batch& batch, std::vector<std::string> candidates, const PlannerOptions& options,
                        const LayerSetup& setup, CommMode baseline_mode = CommMode::kSingleStream);

}  // namespace fulcrum::sim

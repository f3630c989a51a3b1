// `auto`: choosing a strategy per batch by simulated time. Every candidate planner plans the batch, its
// plan runs on the simulator, and the fastest one is the choice. `fulcrum plan` and Python's choose_plan
// choose per batch here (one layer in steady state, forward and backward, on sim/layer: with the whole-layer
// schedule, what a ping-pong layer adds after the first two); `fulcrum simulate` chooses per
// iteration, over its micro-batches and pipeline schedule (training.cpp), with the same mechanism and
// ranking, plus the deferring candidates (AutoScope::kRun), valued by their run as fixed planners.
#pragma once

#include "fulcrum/core/error.hpp"
#include "fulcrum/plan/assignment.hpp"
#include "fulcrum/planners/planner.hpp"
#include "fulcrum/sim/layer.hpp"

#include <nlohmann/json_fwd.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <chrono>
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace fulcrum::sim {

/// Where auto chooses. kBatch: batch by batch (plan, run, Python's choose_plan), where a planner that defers
/// documents (wlb) cannot be a candidate: nothing keeps its queue for the next batch. kRun: iteration by
/// iteration of a simulated run (training.cpp), which keeps a deferring candidate's queue from one
/// iteration to the next and counts only the tries that were chosen.
enum class AutoScope { kBatch, kRun };

/// The default candidates: every registered planner that computes exactly its batch's documents, and for
/// kRun those that defer documents too.
std::vector<std::string> default_auto_candidates(AutoScope scope);

/// Bad input naming `candidates`: an unknown planner, one that neither computes exactly its batch nor (for
/// kRun) only defers some of it, or a name given twice.
void check_auto_candidates(const std::vector<std::string>& candidates, AutoScope scope);

/// Bad input naming `candidates` when they are given but `planners` names no meta-planner (auto).
void check_candidates_need_auto(const std::vector<std::string>& planners, const std::vector<std::string>& candidates);

/// What `plan` and `run` check of auto before any work: its candidates, and that `hardware` is a preset or a
/// readable hardware file (bad input naming the field).
void check_auto_inputs(const std::vector<std::string>& candidates, const std::string& hardware);

/// The layer setup `plan` and `run` choose on: every rank one GPU of `hardware` (tp 1).
LayerSetup gpu_per_rank(const ModelShape& model, const std::string& hardware, CommMode mode);

/// Indices of `seconds`, fastest first; on a tie the one listed first.
std::vector<std::size_t> fastest_first(const std::vector<double>& seconds);

struct BatchChoice {
  Assignment assignment;                 // the chosen candidate's plan, verified (choose_plan only)
  std::string chosen, runner_up;         // runner_up is empty when one candidate planned the batch
  double chosen_s = 0, runner_up_s = 0;  // simulated: a steady layer forward + backward, or an iteration
                                         // (a deferring candidate's: its fixed run's rate on the batch)
  std::vector<std::string> candidates;
  std::vector<double> planning_s;    // per candidate, wall seconds (0 for one that refused the batch)
  std::vector<std::string> refused;  // "name: why" for each candidate that refused it
  double simulating_s = 0;           // wall seconds simulating the candidates' plans
};

/// One candidate's try at a batch: what it produced, its simulated seconds, and the wall seconds of those
/// that went to planning (the rest of its try counts as simulating).
template <class Result>
struct CandidateRun {
  Result result;
  double seconds = 0;
  double planning_s = 0;
};

/// auto's one mechanism, per batch (choose_plan) and per iteration (simulate_training): `run(i)` tries
/// candidate i and returns a CandidateRun. A bad-input Error from it, the candidate refusing the batch (a
/// mask it does not plan, a size past its limits), makes that candidate sit the batch out ("name: why" in
/// choice.refused); any other error propagates. Fills `choice` (candidates, times, chosen and runner-up)
/// and returns the fastest candidate's result; fails (bad input) when every candidate refuses.
template <class Run>
auto choose_fastest(const std::vector<std::string>& candidates, Run&& run, BatchChoice& choice)
    -> decltype(run(std::size_t{0}).result) {
  choice.candidates = candidates;
  choice.planning_s.assign(candidates.size(), 0);
  std::vector<decltype(run(std::size_t{0}).result)> results;
  std::vector<double> seconds;
  std::vector<std::size_t> ran;
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    const auto start = std::chrono::steady_clock::now();
    try {
      auto tried = run(i);
      const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      choice.planning_s[i] = tried.planning_s;
      choice.simulating_s += elapsed - tried.planning_s;
      seconds.push_back(tried.seconds);
      results.push_back(std::move(tried.result));
      ran.push_back(i);
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::kBadInput) throw;
      choice.refused.push_back(candidates[i] + ": " + e.what());
    }
  }
  if (results.empty()) fail("auto: no candidate plans this batch ({})", fmt::join(choice.refused, "; "));
  const auto order = fastest_first(seconds);
  choice.chosen = candidates[ran[order[0]]];
  choice.chosen_s = seconds[order[0]];
  if (order.size() > 1) {
    choice.runner_up = candidates[ran[order[1]]];
    choice.runner_up_s = seconds[order[1]];
  }
  return std::move(results[order[0]]);
}

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
/// plan on `setup` (PassTimes::steady_makespan_s, forward + backward): the candidates that overlap their own traffic in
/// setup.mode (ping-pong when it is signal: 1-byte messages would favour them), the others in `baseline_mode`. Fails
/// (bad input) when no candidate plans the batch, naming each one's reason.
BatchChoice choose_plan(const Batch& batch, std::vector<std::string> candidates, const PlannerOptions& options,
                        const LayerSetup& setup, CommMode baseline_mode = CommMode::kSingleStream);

}  // namespace fulcrum::sim

// What `fulcrum run` does on every rank, as a library call over any runtime::Communicator: draw the same seeded
// batch on every rank, plan it, verify the Assignment and both compiled Plans, generate each rank's
// own Q/K/V/dO, run core attention forward and backward through the executor, check O, LSE, dQ, dK
// and dV against a single-process reference, and gather every rank's times.
#pragma once

#include "fulcrum/plan/compile.hpp"
#include "fulcrum/plan/step_stats.hpp"
#include "fulcrum/planners/planner.hpp"
#include "fulcrum/runtime/attention_data.hpp"
#include "fulcrum/runtime/communicator.hpp"
#include "fulcrum/runtime/executor.hpp"
#include "fulcrum/sim/auto_choice.hpp"
#include "fulcrum/studies/dynamic_masks.hpp"
#include "fulcrum/workload/batch.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace fulcrum::studies {

struct JobConfig {
  std::string dataset = "pretrain";
  std::string model = "tiny";
  std::string mask = "causal";  // a MaskSpec, or vslash-dynamic:GAMMA[:G] (dynamic_masks.hpp)
  Tokens tokens_per_rank = 16384;
  std::uint64_t seed = 0;
  BoundarySplit boundary_split = BoundarySplit::kContiguous;  // how documents crossing ranks are laid out
  std::string planner;                                        // a registered planner, or auto
  // auto's candidates (empty: the defaults) and the hardware model it simulates their plans on, a rank one
  // GPU of it (sim/auto_choice.hpp).
  std::vector<std::string> candidates;
  std::string hardware = "h200-dgx";
  PlannerOptions options;  // model is filled from `model`
  CommMode mode = CommMode::kPingPong;
  runtime::ReferenceKind reference = runtime::ReferenceKind::kKernel;
  int repeats = 1;                   // timed runs of each pass; per-rank times are medians over them
  int threads = 0;                   // kernel threads per rank; 0 = hardware threads / ranks (at least 1)
  bool deterministic = false;        // bitwise-repeatable backward (runtime::ExecuteOptions::deterministic)
  std::string save_plans;            // a folder: rank 0 writes the compiled plans there
  std::string plan_format = "fcpl";  // of the saved plans: fcpl (binary) or json

  void validate(int ranks) const;
  /// What the planner gets: `options` with the model of `model`.
  PlannerOptions planner_options() const;
};

/// Per rank, per pass, plus the job-wide results. Identical on every rank after the job.
struct JobResult {
  JobConfig config;
  int ranks = 0;
  std::vector<runtime::RankSummary> forward, backward;  // [rank]
  std::vector<double> forward_idle_s, backward_idle_s;  // [rank] waiting for the slowest rank at the end
  std::array<double, 5> relative_error{};               // O, LSE, dQ, dK, dV; -1 when not checked
  double planned_imbalance = 1;                         // max / mean forward FLOPs per server in the Assignment
  double packed_imbalance = 1;                          // the same for the batch as packed
  std::size_t tasks = 0;
  std::optional<DynamicMaskStats> dynamic_masks;  // with --mask vslash-dynamic: recall and sparsity
  std::size_t messages = 0;                       // forward + backward, all ranks
  runtime::Timeline timeline;                     // every rank's events of the last repetition, forward then backward
  // Per [rank][step] (nano-batch; a ring's steps), forward and backward added: planned FLOPs and
  // active tiles, bytes sent, and the attention time measured in the last repetition.
  StepMatrix step_flops, step_active_tiles, step_bytes, step_attention_s;
  Plan forward_plan, backward_plan;            // what ran (for the simulator to replay)
  std::optional<sim::AutoChoice> auto_choice;  // a meta-planner's: what it chose for the batch

  double max_error() const;
};

JobResult run_attention_job(const JobConfig& config, runtime::Communicator& comm);

}  // namespace fulcrum::studies

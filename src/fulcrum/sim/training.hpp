// Training iterations of a transformer on a modelled cluster: what `fulcrum simulate` runs.
//
// Each iteration draws micro-batches of documents (per TP group, tokens_per_rank tokens packed in
// order, documents no longer than max_doc_len), plans each with the planner's attention strategy, and
// runs every layer's forward and backward on the discrete-event engine (sim/layer.hpp): matrix work
// from FLOPs and the hardware's MFU, TP all-reduces, then the compiled attention Program with its real
// traffic. Layers of one pass are identical: one layer is simulated, and for ping-pong chains of two and
// three (the whole-layer schedule: one nano-batch's traffic beside the other's matrix work across the
// layer boundary), from which a stage of n layers is extrapolated (sim/layer.hpp); a rank that waits for
// a slower peer in a layer waits in every layer.
//  - Without PP, micro-batches run one after another (gradient accumulation).
//  - Baselines with PP run 1F1B (sim/pipeline.hpp) per pipeline: stage s of pipeline d takes
//    layers / pp x its rank's layer time for each micro-batch.
//  - DistCA with PP runs the phase-aligned ticks: in a tick all working stages run the same phase, and
//    the CA-tasks of every stage and every DP group are pooled and scheduled over all TP groups, the
//    idle stages' included. A tick takes layers / pp x the pooled layer's time.
// Results are of the steady state: warm-up iterations run first and are not measured, and WLB-LLM's queue
// of deferred long documents is carried into and out of the measured window, never drained into it. What
// the queue took in or gave out over the window counts at the rate the planner computed (FLOPs per
// second), so a window of any length measures the same rate (docs/decisions/0010-simulator-model.md).
// An iteration ends with the gradient reduce-scatter and all-gather over the model replicas (not
// overlapped with the backward: the same cost for every planner). Memory per GPU: sim/memory.hpp.
#pragma once

#include "fulcrum/plan/step_stats.hpp"
#include "fulcrum/planners/planner.hpp"
#include "fulcrum/runtime/timeline.hpp"
#include "fulcrum/sim/auto_choice.hpp"
#include "fulcrum/sim/layer.hpp"
#include "fulcrum/sim/memory.hpp"
#include "fulcrum/sim/parallel.hpp"
#include "fulcrum/workload/batch.hpp"

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace fulcrum::sim {

struct TrainingConfig {
  /// Any registered planner, or a meta-planner (auto): each iteration every candidate plans and is simulated on the
  /// same micro-batches, and the fastest one's iteration counts (TrainingResult::auto_choice says which).
  std::string planner;
  CommMode mode = CommMode::kPingPong;               // of planners that overlap their traffic (auto's included)
  CommMode baseline_mode = CommMode::kSingleStream;  // auto's candidates that do not overlap their traffic
  std::vector<std::string> candidates;               // auto's; empty: default_auto_candidates()
  ParallelConfig parallel;
  std::string dataset = "pretrain";
  std::string mask = "causal";  // every document's mask (MaskSpec::parse)
  Tokens max_doc_len = 131072;  // longer documents are cut; the datasets' long documents reach it.
                                // A micro-batch (dp x tokens_per_rank) also cuts what overflows it.
  Tokens tokens_per_rank = 0;   // per TP group and micro-batch; 0 means max_doc_len
  int iterations = 16;          // measured, each on fresh data
  // Before the measured ones, on fresh data: they fill a deferring planner's queue (WLB-LLM's outliers
  // wait for a round of one per micro-batch); planners that hold nothing between iterations skip them.
  int warmup_iterations = 4;
  std::uint64_t seed = 0;
  BoundarySplit boundary_split = BoundarySplit::kContiguous;  // how documents crossing ranks are laid out
  // Ping-pong layers overlap across their boundaries (sim/layer.hpp's whole-layer schedule); false: one
  // layer at a time, a stage of n layers n x one layer.
  bool whole_layer = true;
  MemoryPolicy memory;  // recomputation and optimizer sharding: what each GPU holds (sim/memory.hpp)

  /// Values of planner options (any registered planner's, by name). The model, the machine size and
  /// the CP degree are not read from here: simulate_training sets them from the model, the hardware's
  /// node size over tp, and parallel.cp (training_planner_options).
  PlannerOptions planner_options;

  Tokens rank_tokens() const { return tokens_per_rank > 0 ? tokens_per_rank : max_doc_len; }
  /// Throws fulcrum::Error naming the field.
  void validate(const HardwareModel& gpu, const ModelShape& model) const;
};

/// Where an average GPU's iteration goes; the parts add up to the iteration time.
struct TimeBreakdown {
  double linear_s = 0;        // matrix layers and TP all-reduces, and what backward recomputes
  double attention_s = 0;     // attention kernels, merges and sums
  double exposed_comm_s = 0;  // attention traffic not hidden behind compute
  double idle_s = 0;          // waiting for stragglers and pipeline bubbles
  double dp_sync_s = 0;       // gradient synchronisation
};

struct TrainingResult {
  TrainingConfig config;
  std::string model, hardware;
  std::vector<double> iteration_s;  // per measured iteration
  double mean_iteration_s = 0;
  double tokens_per_iteration = 0;  // mean of those computed; a deferring planner's differ from those drawn
  double carried_tokens = 0;        // what the deferral queue grew by over the window (tokens; < 0: shrank)
  double computed_work_share = 1;   // FLOPs computed over FLOPs drawn in the window (1 if nothing is deferred)
  // The window's drawn tokens per second at the rate it computed: (tokens_per_iteration + carried_tokens /
  // iterations) x computed_work_share / mean_iteration_s; tokens_per_iteration / mean_iteration_s when
  // nothing is deferred.
  double tokens_per_s = 0;
  // The planner's wall seconds per iteration on the machine running the simulator (auto: the chosen plans),
  // and how far they exceed the iteration they are hidden behind when planned a step ahead (mean over
  // iterations of max(0, planning - iteration)). Neither enters the times: they measure this host, not the
  // cluster's, and would make a simulation depend on its load; `fulcrum simulate` warns when the excess shows.
  double planning_s = 0, unhidden_planning_s = 0;
  TimeBreakdown breakdown;         // mean over GPUs and iterations
  double attention_imbalance = 0;  // max / mean over TP groups of attention seconds, mean over iterations
  // Balance over ranks and steps (a ring's; other plans' nano-batches) of the first iteration's first
  // micro-batch layer, forward + backward, 1F1B schedules only (phase-aligned ticks pool micro-batches).
  StepBalance step_flops, step_attention;
  double attention_bytes = 0;                 // attention traffic per iteration, all layers and ranks (mean)
  MemoryUse memory;                           // the fullest GPU in the worst iteration
  std::vector<runtime::TimelineEvent> trace;  // the first iteration, per TP group (rank = stage x dp + d)
  std::optional<AutoChoice> auto_choice;      // a meta-planner's choice report
  nlohmann::json to_json() const;
};

/// The CP degree config.planner runs with: 1 for planners without CP groups; else the layout's cp, or
/// --cp-degree, or when neither is given a node of up to 8 TP groups (per-document CP) or the least
/// degree whose groups hold the longest document whole (WLB-LLM). For auto, the layout's (0: each
/// candidate's own).
int cp_degree_for(const TrainingConfig& config, const ModelShape& model, const HardwareModel& gpu);

/// Whether config.planner, a packing planner, keeps the longest document whole in CP groups of `cp`:
/// WLB-LLM would otherwise cut it into separate pieces, dropping the attention between them.
bool keeps_documents_whole(const TrainingConfig& config, const ModelShape& model, const HardwareModel& gpu, int cp);

/// "whole" | "per-layer" -> TrainingConfig::whole_layer; fails naming `field` otherwise.
bool parse_layer_schedule(std::string_view text, std::string_view field = "layer-schedule");

/// Whether `planner` is auto or a planner that orders its own work to overlap traffic: either runs in
/// every mode a study asks for.
bool overlaps_traffic(const std::string& planner);

TrainingResult simulate_training(const TrainingConfig& config, const ModelShape& model, const HardwareModel& gpu);

/// The options the planner gets: config.planner_options with the model, a machine of
/// gpu.devices_per_node / tp TP groups (the simulator's ranks), cp-degree = parallel.cp for planners that
/// plan in CP groups, and options declared at most tokens-per-rank clamped to a rank's tokens.
PlannerOptions training_planner_options(const TrainingConfig& config, const ModelShape& model,
                                        const HardwareModel& gpu);

}  // namespace fulcrum::sim

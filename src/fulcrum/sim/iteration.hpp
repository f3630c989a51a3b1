// One training iteration of one planner on the simulator: its micro-batches planned and every layer pass
// simulated, scheduled as 1F1B pipelines (run_1f1b) or, for a planner that pools the pipeline stages'
// ticks (DistCA with PP), tick by tick (run_phase_aligned). training.cpp runs these over a window.
#pragma once

#include "fulcrum/planners/planner.hpp"
#include "fulcrum/runtime/timeline.hpp"
#include "fulcrum/sim/layer.hpp"
#include "fulcrum/workload/batch.hpp"

#include <string>
#include <vector>

namespace fulcrum::sim {

// Per TP group ("slot": stage x dp + d), the busy seconds of one iteration by kind.
struct SlotTotals {
  std::vector<double> linear, attention, exposed;
  explicit SlotTotals(int slots) : linear(slots, 0), attention(slots, 0), exposed(slots, 0) {}
  void add(int slot, const PassTimes& t, int rank, double layers) {
    linear[slot] += layers * t.linear_s[rank];
    attention[slot] += layers * (t.attention_s[rank] + t.other_s[rank]);
    exposed[slot] += t.layers_exposed_s(rank, layers);
  }
};

/// What one iteration cost and computed.
struct IterationOutcome {
  double iteration_s = 0;  // without the gradient synchronisation
  double planning_s = 0;   // wall seconds in Planner::plan (not its verification)
  double work = 0;         // forward FLOPs per layer (attention + linear) of the documents computed
  double tokens = 0, bytes = 0, tokens_in_flight = 0, microbatch_tokens = 0, attention_buffers = 0;
  SlotTotals slots;
  std::vector<runtime::TimelineEvent> trace;
  StepMatrix step_flops, step_attention_s;  // the first micro-batch's layer, forward + backward (1F1B)
  explicit IterationOutcome(int n) : slots(n) {}
};

/// The layout an iteration runs on: its layer setup, dp groups per stage, stages, micro-batches.
struct IterationContext {
  LayerSetup setup;
  int dp, pp, microbatches;
  double stage_layers;
  double p2p_s;  // one micro-batch's activations to the next stage
};

/// Forward FLOPs per layer (attention + linear) of `batch`'s documents.
double batch_work(const Batch& batch, const ModelShape& model);

/// Baselines (and DistCA without PP): every micro-batch planned over one stage's dp groups, each pipeline
/// (one TP group per stage) running 1F1B on its rank's layer times.
IterationOutcome run_1f1b(const IterationContext& cx, Planner& planner, const std::vector<Batch>& microbatches);

/// A planner that pools the stages' work (DistCA with PP): each tick of the phase-aligned schedule planned
/// as one batch over every stage's TP groups, idle stages serving attention.
IterationOutcome run_phase_aligned(const IterationContext& cx, Planner& planner,
                                   const std::vector<Batch>& microbatches);

}  // namespace fulcrum::sim

// One transformer layer of one Assignment on its attention ranks (TP groups), one pass, in virtual time:
// each rank runs its matrix work (QKV/O projections and MLP, with the tensor-parallel all-reduces) and
// the compiled attention Program on the discrete-event engine's compute stream. Single-stream runs all
// the matrix work first; ping-pong runs nano-batch 1's half after nano-batch 0's dispatch is launched,
// so it hides that traffic (DistCA's ping-pong). The layer's time on a rank is when its Program ends,
// so waiting for slower peers (stragglers) counts on the rank that waits.
//
// The whole-layer schedule (LayerSetup::whole_layer, ping-pong): a pass runs many identical layers, and
// DistCA overlaps one nano-batch's returns and next dispatch with the other's matrix work across the
// layer boundary (sim/layer_chain.hpp). Chains of two and three layers are simulated beside the single
// one; what the third adds is the steady-state layer, so a stage of n >= 2 layers ends at the second's end
// plus n - 2 steady layers (PassTimes::layers_end_s), the ones past the third at the period of the
// slowest rank the rank is coupled to. Without it (or single-stream) the layers do not
// overlap: n x end_s.
#pragma once

#include "fulcrum/plan/assignment.hpp"
#include "fulcrum/plan/step_stats.hpp"
#include "fulcrum/sim/engine.hpp"
#include "fulcrum/sim/memory.hpp"
#include "fulcrum/sparse/dynamic_mask.hpp"

#include <optional>

#include <string_view>
#include <vector>

namespace fulcrum::sim {

struct LayerSetup {
  ModelShape model;
  HardwareModel gpu;    // one GPU
  HardwareModel group;  // tp_group_hardware(gpu, tp)
  int tp = 1;
  CommMode mode = CommMode::kPingPong;
  bool whole_layer = true;  // ping-pong layers overlap across their boundaries (else one layer at a time)
  // What the backward pass recomputes first, as matrix-stream work before the layer's backward: the core
  // attention's forward calls on the rank that runs them (selective and full), and the layer's matrix
  // forward (full).
  Recompute recompute = Recompute::kNone;
  // MTraining's dynamic mask: its online estimator runs in every forward layer before the attention, on the
  // ranks that hold each estimated document's keys (layer_estimator_s). nullopt: static masks.
  std::optional<sparse::DynamicMaskSpec> dynamic_mask = std::nullopt;
};

/// Seconds `rank` spends in one forward layer on MTraining's estimator (0 without a dynamic mask): for each
/// estimated document's piece it holds (k keys), the observation window's logits against its keys, a
/// w x k x head_dim product per q head at the attention table's (w, k) rate; three streaming passes over
/// those fp32 logits (softmax, column sums, diagonal sums) at the memory bandwidth; and one call's overheads.
/// The estimator's collectives (a few scalars per row and the scores, over the document's ranks) and its
/// index selection are left out: under 1% of the logits' bytes at a 64-row window.
double layer_estimator_s(const Assignment& assignment, const LayerSetup& setup, int rank);

/// Per rank, seconds (or bytes) of one pass of one layer.
struct PassTimes {
  std::vector<double> end_s;           // when the rank finishes the pass, waits included
  std::vector<double> linear_s;        // matrix work and TP all-reduces
  std::vector<double> attention_s;     // attention kernels (wall, on the group)
  std::vector<double> other_s;         // copies, merges and sums of partial results
  std::vector<double> exposed_comm_s;  // blocked on traffic after every peer had started
  std::vector<double> peer_wait_s;     // blocked on a slower peer
  std::vector<double> bytes_sent;
  std::vector<double> workspace_bytes;  // attention buffers beyond the rank's own rows
  std::vector<Tokens> tokens;           // rows the rank owns (its activations)
  SimResult timeline;                   // the engine's, for traces
  StepMatrix step_flops;                // [rank][step] (a ring's steps; else nano-batches): planned FLOPs
  StepMatrix step_attention_s;          // [rank][step]: simulated attention kernel seconds
  // The whole-layer schedule's chains of two and three layers (else 2 x and 1 x one layer): per rank, when
  // the second layer ends and what the third adds (a steady-state layer; a rank that ends its first layer
  // early still waits for its peers in the next ones), its exposed traffic likewise, and the slowest
  // rank's. A stage of n layers is extrapolated from them, exact for a periodic schedule.
  std::vector<double> second_end_s, steady_layer_s;
  std::vector<double> second_exposed_s, steady_exposed_s;
  double second_makespan_s = 0, steady_makespan_s = 0;
  // Per rank, what each layer past the third adds: the longest steady layer among the ranks it exchanges
  // data with, directly or through others. Every layer a rank waits for its peers' dispatches and
  // returns, so coupled ranks settle to one period, the slowest's; a rank that was ahead adds less from
  // the second layer to the third than that (it still uses up its lead), and extrapolating with its own
  // third layer would put its end early by the difference every further layer. Layers that do not
  // overlap: end_s.
  std::vector<double> period_s;
  double makespan_s() const;  // the slowest rank's end
  /// When the rank ends `layers` (a whole number) consecutive layers, the traffic exposed in them, and
  /// when the slowest rank ends them.
  double layers_end_s(int rank, double layers) const {
    return extrapolate(end_s[rank], second_end_s[rank], steady_layer_s[rank], period_s[rank], layers);
  }
  double layers_exposed_s(int rank, double layers) const {
    const double steady = steady_exposed_s[rank];
    return extrapolate(exposed_comm_s[rank], second_exposed_s[rank], steady, steady, layers);
  }
  double layers_makespan_s(double layers) const {
    return extrapolate(makespan_s(), second_makespan_s, steady_makespan_s, steady_makespan_s, layers);
  }

 private:
  // n layers from one, two, what the third adds and what each later one adds (exact for a periodic
  // schedule).
  static double extrapolate(double one, double two, double third, double period, double layers) {
    if (layers <= 1) return layers * one;
    if (layers <= 3) return two + (layers - 2) * third;
    return two + third + (layers - 3) * period;
  }
};

/// Compiles `assignment` for `pass` per setup.mode and runs it on setup.group after each rank's matrix
/// work. `active` (one flag per rank, empty = all) marks ranks that run the layer's matrix work; the
/// others only serve attention (idle pipeline stages in DistCA's phase-aligned schedule).
PassTimes simulate_pass(const Assignment& assignment, const LayerSetup& setup, Pass pass,
                        const std::vector<bool>& active = {});

/// Matrix-work seconds of `tokens` on one TP group for one layer: forward, backward (2x the FLOPs),
/// each with two all-reduces of the layer's activations across the tp GPUs.
double layer_linear_forward_s(const LayerSetup& setup, Tokens tokens);
double layer_linear_backward_s(const LayerSetup& setup, Tokens tokens);

}  // namespace fulcrum::sim

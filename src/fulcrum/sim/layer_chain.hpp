// Consecutive layers of one pass as one Plan, for the whole-layer schedule of DistCA's ping-pong.
//
// A layer's Program (compile's ping-pong order) is: launch nano-batch 0's dispatch and 1's, nano-batch
// 0's attention, its return launched, 1's attention, its return launched, then the tail: wait for the
// returns, copy and merge the results. The layer's matrix work runs in two halves, nano-batch 0's
// before the first launch and nano-batch 1's before nano-batch 1's dispatch (sim/layer.hpp).
// Chained, layer l + 1 does not wait for all of layer l's tail: nano-batch 0's half of its matrix work
// (in the real schedule: post-attention of layer l fused with pre-attention of layer l + 1) waits only for
// nano-batch 0's return, so it runs while nano-batch 1's return is in flight; nano-batch 1's half then
// waits for the rest of the tail, and runs while nano-batch 0's next dispatch is in flight. So each of a
// layer's four transfers has compute of the other nano-batch beside it, across the layer boundary, as
// DistCA runs. Single-stream Programs (no nano-batch 1 launch) chain strictly: the tail, then the next
// layer's matrix work.
//
// Timing model: nano-batch 0's return stands for the outputs its matrix work needs (in DistCA a
// nano-batch is half of every rank's tokens; compile's nano-batches are halves of each server's tasks, so
// the rows of one return are not exactly one half's: the schedule's timing, not its data flow, is what is
// modelled).
#pragma once

#include "fulcrum/plan/program.hpp"
#include "fulcrum/sim/engine.hpp"

#include <vector>

namespace fulcrum::sim {

struct LayerChain {
  Plan plan;           // `layers` copies of each rank's Program, interleaved at the layer boundaries
  SimOptions options;  // each layer's matrix work, placed per the schedule
};

/// Chains `layers` (>= 1) copies of `layer`, each rank running `matrix_s[rank]` of matrix work per layer,
/// in halves per nano-batch when `split` (ping-pong; signal's free traffic needs no overlap) and the rank's
/// Program has a nano-batch 1 launch, else whole before each layer's Program. One layer is `layer` itself.
LayerChain chain_layers(const Plan& layer, const std::vector<double>& matrix_s, bool split, int layers);

/// The matrix work of one layer as chain_layers places it in the first, for simulating `layer` itself
/// (no copy of its Programs): equal to chain_layers(layer, matrix_s, split, 1).options.
SimOptions layer_matrix_work(const Plan& layer, const std::vector<double>& matrix_s, bool split);

}  // namespace fulcrum::sim

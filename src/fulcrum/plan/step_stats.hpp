// Work per rank and per nano-batch (a ring's steps are its nano-batches), and how evenly it spreads:
// MTraining's balance metrics. A ring step synchronises its ranks (each waits for the K/V its
// predecessor forwards), so imbalance inside a step is idle time even when every rank's total is equal.
#pragma once

#include "fulcrum/plan/program.hpp"

#include <vector>

namespace fulcrum {

/// A [rank][step] table of one quantity.
using StepMatrix = std::vector<std::vector<double>>;

struct StepBalance {
  double worker = 1;     // max / mean over ranks of each rank's total
  double step_mean = 1;  // per rank, max / mean over its steps; averaged over ranks
  double step_sync = 1;  // Σ_t max_r / Σ_t mean_r: the synchronised steps' cost over the balanced cost
};
/// The balance of a [rank][step] table (1 where a row or a step is all zero).
StepBalance step_balance(const StepMatrix& table);

/// What one pass's Plan asks of each rank at each step (Instruction::stream), from its instructions.
struct PlanSteps {
  StepMatrix flops;         // attention FLOPs (backward: 2.5x the forward's)
  StepMatrix active_tiles;  // (head, tile_tokens x tile_tokens tile) pairs of items with a visible pair
  StepMatrix bytes_sent;    // bytes of the messages launched
};
/// `tile_tokens` = 0 leaves active_tiles zero: classifying every tile costs far more than the rest, and
/// the simulator, which asks for FLOPs only, ran most of its time there.
PlanSteps plan_steps(const Plan& plan, Tokens tile_tokens = 64);

}  // namespace fulcrum

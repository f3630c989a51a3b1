// The discrete-event simulator: runs the same per-rank Programs the executor runs, in virtual time, on a
// HardwareModel. Each rank has one compute stream that executes its instructions in order; messages
// become flows once both their send and their receive are posted (rendezvous), start after the link's
// latency, and share each device's link ports fairly: a flow moves at the smallest of
// (port bandwidth / flows on that port) over its sender's egress and its receiver's ingress port.
// Compute instructions take their modelled time at full speed, or, when the hardware says the devices
// of a node share compute slots (ranks oversubscribing CPU cores), their fair share of those slots.
// Events at the same time are handled in a fixed order (ranks by index, flows by creation), so the same
// inputs always give the identical timeline.
#pragma once

#include "fulcrum/cost/hardware_model.hpp"
#include "fulcrum/plan/program.hpp"
#include "fulcrum/runtime/executor.hpp"

#include <vector>

namespace fulcrum::sim {

struct SimOptions {
  /// Other compute (the layer's matrix work) on a rank's compute stream, outside the Program: per rank,
  /// a list of {before_instruction, seconds} sorted by instruction (an index equal to the program's
  /// length runs after it). Empty means none. Recorded as "linear" events in other_compute_s.
  struct ExtraCompute {
    std::size_t before_instruction = 0;
    double seconds = 0;
  };
  std::vector<std::vector<ExtraCompute>> extra_compute;
};

struct SimResult {
  std::vector<runtime::ExecutionResult> ranks;  // per rank, the same numbers and events as the executor's
  double makespan_s = 0;                        // the last rank's end
  /// Times the event loop looked at a rank's program: once per rank at the start, then once per compute
  /// end or answered wait, whatever the number of ranks (the loop touches only the ranks an event
  /// concerns, so large jobs cost what they do, not events x ranks).
  std::size_t rank_visits = 0;
};

/// Simulates one Plan (one pass). Throws a runtime Error if the programs deadlock.
SimResult simulate_plan(const Plan& plan, const HardwareModel& hardware, const SimOptions& options = {});

/// Seconds one attention call takes on `hardware`: each item at the throughput of its shape, and the call's
/// fixed costs (hardware.overheads).
double attention_call_s(const Plan& plan, const std::vector<AttentionItem>& items, const HardwareModel& hardware,
                        bool backward);

}  // namespace fulcrum::sim

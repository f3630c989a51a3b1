// Pipeline-parallel schedules in virtual time: given what each micro-batch's forward and backward take on
// each stage (which differ when documents do), when does every step run and how long is the iteration.
// 1F1B (PipeDream-flush, as Megatron-LM runs it): stage s does min(S - 1 - s, M) warm-up forwards, then
// alternates one forward and one backward, then drains the remaining backwards. A forward of micro-batch
// m on stage s waits for stage s - 1's forward of m; a backward waits for stage s + 1's backward of m;
// each hop adds `p2p_s`.
#pragma once

#include <vector>

namespace fulcrum::sim {

struct StageWork {
  double forward_s = 0;
  double backward_s = 0;
};

struct PipelineStep {
  int stage = 0;
  int microbatch = 0;
  bool backward = false;
  double start_s = 0, end_s = 0;
};

struct PipelineResult {
  double iteration_s = 0;
  std::vector<double> busy_s;  // per stage
  std::vector<double> idle_s;  // per stage: iteration_s - busy_s (the bubbles)
  std::vector<PipelineStep> steps;
};

/// work[s][m]: stage s, micro-batch m. Every stage must list the same number of micro-batches.
PipelineResult simulate_1f1b(const std::vector<std::vector<StageWork>>& work, double p2p_s = 0);

/// One tick of DistCA's phase-aligned schedule: every stage that works runs the same phase, so the
/// core attention of all of them is pooled on every attention server, idle stages' included.
struct Tick {
  bool backward = false;
  std::vector<int> microbatch;  // per stage: the micro-batch it runs, or -1 (idle: it serves attention)
};

/// The phase-aligned schedule of `microbatches` through `stages`: ticks alternate forward and backward
/// (a phase no stage can run is skipped); in a tick every stage runs its next step of that phase if its
/// input is ready (forward: the previous stage ran it in an earlier tick; backward: the next stage did,
/// or, on the last stage, its own forward) and, for a forward, if it holds fewer than
/// in_flight_limit(stages, s) micro-batches in flight.
std::vector<Tick> phase_aligned_ticks(int stages, int microbatches);

/// Micro-batches stage s may hold: 2 (stages - s) - 1. Ticks alternate phases, so a forward reaches
/// the next stage two ticks later, not one, and the round trip from stage s to the last stage and back
/// takes twice 1F1B's; with 1F1B's bound of stages - s a stage would stall a whole round for its next
/// backward and the schedule would grow well past 2 (M + S - 1) ticks. The extra activations are the
/// price of phase alignment, and the memory model counts them.
int in_flight_limit(int stages, int stage);

}  // namespace fulcrum::sim

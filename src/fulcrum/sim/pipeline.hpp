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

}  // namespace fulcrum::sim

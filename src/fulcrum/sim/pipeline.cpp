#include "fulcrum/sim/pipeline.hpp"

#include "fulcrum/core/error.hpp"

#include <algorithm>
#include <array>

namespace fulcrum::sim {
namespace {

struct Op {
  int microbatch = 0;
  bool backward = false;
};

// Stage s's 1F1B order.
std::vector<Op> one_f_one_b(int stages, int microbatches, int s) {
  const int warmup = std::min(stages - 1 - s, microbatches);
  std::vector<Op> ops;
  int next_forward = 0, next_backward = 0;
  for (; next_forward < warmup; ++next_forward) ops.push_back({next_forward, false});
  while (next_forward < microbatches) {
    ops.push_back({next_forward++, false});
    ops.push_back({next_backward++, true});
  }
  while (next_backward < microbatches) ops.push_back({next_backward++, true});
  return ops;
}

}  // namespace

PipelineResult simulate_1f1b(const std::vector<std::vector<StageWork>>& work, double p2p_s) {
  const int stages = static_cast<int>(work.size());
  if (stages < 1) fail("work: no stages (need >= 1)");
  const int microbatches = static_cast<int>(work.front().size());
  if (microbatches < 1) fail("work[0]: no micro-batches (need >= 1)");
  for (int s = 0; s < stages; ++s) {
    if (static_cast<int>(work[s].size()) != microbatches) {
      fail("work[{}]: {} micro-batches, work[0] has {}", s, work[s].size(), microbatches);
    }
  }
  if (!(p2p_s >= 0)) fail("p2p_s = {}: must be >= 0", p2p_s);

  // done[s][m][backward]: when that step ended (-1: not yet).
  std::vector<std::vector<std::array<double, 2>>> done(stages,
                                                       std::vector<std::array<double, 2>>(microbatches, {-1, -1}));
  std::vector<std::vector<Op>> order;
  order.reserve(static_cast<std::size_t>(stages));
  for (int s = 0; s < stages; ++s) order.push_back(one_f_one_b(stages, microbatches, s));
  std::vector<std::size_t> next(stages, 0);
  std::vector<double> free_at(stages, 0);
  PipelineResult out;
  out.busy_s.assign(stages, 0);
  // Each pass over the stages schedules every step whose input is ready; 1F1B never deadlocks, so
  // every pass schedules at least one step.
  for (bool progress = true; progress;) {
    progress = false;
    for (int s = 0; s < stages; ++s) {
      while (next[s] < order[s].size()) {
        const Op op = order[s][next[s]];
        double ready = free_at[s];
        if (!op.backward && s > 0) {
          if (done[s - 1][op.microbatch][0] < 0) break;
          ready = std::max(ready, done[s - 1][op.microbatch][0] + p2p_s);
        }
        if (op.backward && s + 1 < stages) {
          if (done[s + 1][op.microbatch][1] < 0) break;
          ready = std::max(ready, done[s + 1][op.microbatch][1] + p2p_s);
        }
        const StageWork& w = work[s][op.microbatch];
        const double length = op.backward ? w.backward_s : w.forward_s;
        done[s][op.microbatch][op.backward ? 1 : 0] = ready + length;
        free_at[s] = ready + length;
        out.busy_s[s] += length;
        out.steps.push_back({s, op.microbatch, op.backward, ready, ready + length});
        ++next[s];
        progress = true;
      }
    }
  }
  for (int s = 0; s < stages; ++s) out.iteration_s = std::max(out.iteration_s, free_at[s]);
  for (int s = 0; s < stages; ++s) out.idle_s.push_back(out.iteration_s - out.busy_s[s]);
  return out;
}

int in_flight_limit(int stages, int stage) { return 2 * (stages - stage) - 1; }

std::vector<Tick> phase_aligned_ticks(int stages, int microbatches) {
  if (stages < 1) fail("stages = {}: must be >= 1", stages);
  if (microbatches < 1) fail("microbatches = {}: must be >= 1", microbatches);
  // The tick in which stage s ran micro-batch m forward / backward (-1: not yet).
  std::vector<std::vector<int>> forward_tick(stages, std::vector<int>(microbatches, -1));
  auto backward_tick = forward_tick;
  std::vector<int> forwards(stages, 0), backwards(stages, 0);
  std::vector<Tick> ticks;
  bool backward = false;
  for (int empty_phases = 0; backwards.front() < microbatches; backward = !backward) {
    const int t = static_cast<int>(ticks.size());
    Tick tick{backward, std::vector<int>(stages, -1)};
    for (int s = 0; s < stages; ++s) {
      if (!backward) {
        const int m = forwards[s];
        const bool ready = m < microbatches && (s == 0 || (forward_tick[s - 1][m] >= 0 && forward_tick[s - 1][m] < t));
        if (ready && forwards[s] - backwards[s] < in_flight_limit(stages, s)) tick.microbatch[s] = m;
      } else {
        const int m = backwards[s];
        if (m >= forwards[s]) continue;  // nothing forwarded is waiting for its backward
        const int after = s + 1 < stages ? backward_tick[s + 1][m] : forward_tick[s][m];
        if (after >= 0 && after < t) tick.microbatch[s] = m;
      }
    }
    if (std::all_of(tick.microbatch.begin(), tick.microbatch.end(), [](int m) { return m < 0; })) {
      if (++empty_phases > 2)
        fail_runtime("phase_aligned_ticks: no stage can run (stages {}, microbatches {})", stages, microbatches);
      continue;
    }
    empty_phases = 0;
    for (int s = 0; s < stages; ++s) {
      const int m = tick.microbatch[s];
      if (m < 0) continue;
      (backward ? backward_tick : forward_tick)[s][m] = t;
      ++(backward ? backwards : forwards)[s];
    }
    ticks.push_back(std::move(tick));
  }
  return ticks;
}

}  // namespace fulcrum::sim

#include "fulcrum/studies/sim_validation.hpp"

#include "fulcrum/sim/engine.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace fulcrum::studies {
namespace {

double relative(double predicted, double measured) { return measured > 0 ? std::abs(predicted / measured - 1) : 0; }

// A pass takes as long as its slowest rank's program (ranks start together after a barrier).
double pass_s(const std::vector<runtime::RankSummary>& ranks) {
  double out = 0;
  for (const auto& r : ranks) out = std::max(out, r.total_s);
  return out;
}

}  // namespace

double SimValidation::worst_attention_error() const {
  double worst = 0;
  for (std::size_t r = 0; r < measured_attention_s.size(); ++r) {
    worst = std::max(worst, relative(predicted_attention_s[r], measured_attention_s[r]));
  }
  return worst;
}

double SimValidation::iteration_error() const { return relative(predicted_iteration_s, measured_iteration_s); }

SimValidation validate_with_simulator(const studies::JobResult& job, const HardwareModel& hardware) {
  sim::SimOptions options;
  const auto forward = sim::simulate_plan(job.forward_plan, hardware, options);
  const auto backward = sim::simulate_plan(job.backward_plan, hardware, options);
  SimValidation v;
  v.planner = job.config.planner;
  v.mode = to_string(job.config.mode);
  for (int r = 0; r < job.ranks; ++r) {
    v.measured_attention_s.push_back(job.forward[r].attention_s + job.backward[r].attention_s);
    v.predicted_attention_s.push_back(forward.ranks[r].summary.attention_s + backward.ranks[r].summary.attention_s);
  }
  v.measured_iteration_s = pass_s(job.forward) + pass_s(job.backward);
  v.predicted_iteration_s = forward.makespan_s + backward.makespan_s;
  return v;
}

}  // namespace fulcrum::studies

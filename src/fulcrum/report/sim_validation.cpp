#include "fulcrum/report/sim_validation.hpp"

#include "fulcrum/report/run_report.hpp"
#include "fulcrum/report/table.hpp"
#include "fulcrum/sim/engine.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace fulcrum {
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

SimValidation validate_with_simulator(const runtime::JobResult& job, const HardwareModel& hardware) {
  sim::SimOptions options;
  const auto forward = sim::simulate_plan(job.forward_plan, hardware, options);
  const auto backward = sim::simulate_plan(job.backward_plan, hardware, options);
  SimValidation v;
  v.planner = job.config.planner;
  v.mode = mode_name(job.config);
  for (int r = 0; r < job.ranks; ++r) {
    v.measured_attention_s.push_back(job.forward[r].attention_s + job.backward[r].attention_s);
    v.predicted_attention_s.push_back(forward.ranks[r].summary.attention_s + backward.ranks[r].summary.attention_s);
  }
  v.measured_iteration_s = pass_s(job.forward) + pass_s(job.backward);
  v.predicted_iteration_s = forward.makespan_s + backward.makespan_s;
  return v;
}

std::string validation_table(const std::vector<SimValidation>& rows) {
  Table t({"planner", "mode", "rank", "attention ms measured", "predicted", "error"});
  for (const auto& v : rows) {
    for (std::size_t r = 0; r < v.measured_attention_s.size(); ++r) {
      t.add_row({v.planner, v.mode, std::to_string(r), fmt::format("{:.1f}", 1e3 * v.measured_attention_s[r]),
                 fmt::format("{:.1f}", 1e3 * v.predicted_attention_s[r]),
                 fmt::format("{:+.1f}%", 100 * (v.predicted_attention_s[r] / v.measured_attention_s[r] - 1))});
    }
    t.add_row({v.planner, v.mode, "iteration", fmt::format("{:.1f}", 1e3 * v.measured_iteration_s),
               fmt::format("{:.1f}", 1e3 * v.predicted_iteration_s),
               fmt::format("{:+.1f}%", 100 * (v.predicted_iteration_s / v.measured_iteration_s - 1))});
  }
  return t.to_string();
}

nlohmann::json validation_json(const std::vector<SimValidation>& rows) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& v : rows) {
    out.push_back({{"planner", v.planner},
                   {"mode", v.mode},
                   {"measured_attention_s", v.measured_attention_s},
                   {"predicted_attention_s", v.predicted_attention_s},
                   {"measured_iteration_s", v.measured_iteration_s},
                   {"predicted_iteration_s", v.predicted_iteration_s},
                   {"worst_attention_error", v.worst_attention_error()},
                   {"iteration_error", v.iteration_error()}});
  }
  return out;
}

}  // namespace fulcrum

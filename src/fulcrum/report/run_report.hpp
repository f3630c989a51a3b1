// What `fulcrum run` and `fulcrum demo` print and write for finished attention jobs: per-rank tables,
// a comparison across planners and modes, JSON, and the per-rank attention-time bar chart.
#pragma once

#include "fulcrum/report/svg_chart.hpp"
#include "fulcrum/studies/attention_job.hpp"

#include <nlohmann/json.hpp>

#include <span>
#include <string>
#include <vector>

namespace fulcrum {

/// One job's numbers, forward and backward added, per rank and over the job.
struct RunMetrics {
  std::string planner;
  std::string mode;  // pingpong | single-stream | signal
  std::vector<double> attention_s, attention_cpu_s, comm_s, exposed_comm_s, idle_s, bytes_sent;
  double imbalance = 1;      // max / mean attention time (wall)
  double imbalance_cpu = 1;  // max / mean attention CPU time (immune to time-sharing of oversubscribed cores)
  double comm_total_s = 0, exposed_total_s = 0;
  double overlap = 0;     // 1 - exposed / communication time, over all ranks
  double max_error = -1;  // largest relative error of O, LSE, dQ, dK, dV; -1 when not checked
};

RunMetrics run_metrics(const studies::JobResult& job);
const char* mode_name(const studies::JobConfig& config);

/// Per rank: attention, CPU, communication, exposed communication, idle, bytes sent.
std::string run_rank_table(const studies::JobResult& job);
/// One row per job: planner, mode, max/mean attention, imbalance, communication, exposed, overlap, error.
std::string run_comparison_table(std::span<const studies::JobResult> jobs);
/// One row per job: worker- and step-level balance (step_stats.hpp) of planned FLOPs, active tiles and
/// measured attention time per rank and step (a ring's steps; other plans' nano-batches).
std::string step_balance_table(std::span<const studies::JobResult> jobs);
nlohmann::json run_json(std::span<const studies::JobResult> jobs);
/// Attention CPU time per rank, one series per job (e.g. per planner).
BarChart attention_chart(std::span<const studies::JobResult> jobs);

}  // namespace fulcrum

#include "fulcrum/report/run_report.hpp"

#include "fulcrum/core/error.hpp"
#include "fulcrum/plan/stats.hpp"
#include "fulcrum/report/auto_choice_report.hpp"
#include "fulcrum/report/report_json.hpp"
#include "fulcrum/report/table.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

namespace fulcrum {
namespace {

double sum(const std::vector<double>& v) { return std::accumulate(v.begin(), v.end(), 0.0); }
double largest(const std::vector<double>& v) { return v.empty() ? 0 : *std::max_element(v.begin(), v.end()); }
std::string seconds(double s) { return fmt::format("{:.4f}", s); }
std::string error_text(double e) { return e < 0 ? "n/a" : fmt::format("{:.1e}", e); }

}  // namespace

const char* mode_name(const studies::JobConfig& config) { return to_string(config.mode); }

RunMetrics run_metrics(const studies::JobResult& job) {
  RunMetrics m;
  m.planner = job.config.planner;
  m.mode = mode_name(job.config);
  for (int r = 0; r < job.ranks; ++r) {
    const auto &f = job.forward[r], &b = job.backward[r];
    m.attention_s.push_back(f.attention_s + b.attention_s);
    m.attention_cpu_s.push_back(f.attention_cpu_s + b.attention_cpu_s);
    m.comm_s.push_back(f.comm_s + b.comm_s);
    m.exposed_comm_s.push_back(f.exposed_comm_s + b.exposed_comm_s);
    m.idle_s.push_back(job.forward_idle_s[r] + job.backward_idle_s[r] + f.peer_wait_s + b.peer_wait_s);
    m.bytes_sent.push_back(f.bytes_sent + b.bytes_sent);
  }
  m.imbalance = max_over_mean(m.attention_s);
  m.imbalance_cpu = max_over_mean(m.attention_cpu_s);
  m.comm_total_s = sum(m.comm_s);
  m.exposed_total_s = sum(m.exposed_comm_s);
  m.overlap = m.comm_total_s > 0 ? 1.0 - m.exposed_total_s / m.comm_total_s : 0.0;
  m.max_error = job.max_error();
  return m;
}

std::string run_rank_table(const studies::JobResult& job) {
  const RunMetrics m = run_metrics(job);
  // The columns are the keys of run_json's per_rank entries (forward and backward added).
  Table t({"rank", "attention_s", "attention_cpu_s", "comm_s", "exposed_comm_s", "idle_s", "bytes_sent"});
  for (int r = 0; r < job.ranks; ++r) {
    t.add_row({std::to_string(r), seconds(m.attention_s[r]), seconds(m.attention_cpu_s[r]), seconds(m.comm_s[r]),
               seconds(m.exposed_comm_s[r]), seconds(m.idle_s[r]), format_bytes(m.bytes_sent[r])});
  }
  std::string dynamic;
  if (const auto& d = job.dynamic_masks) {
    dynamic = fmt::format(
        "dynamic masks: {} documents estimated, recall of the observation rows min {:.4f} mean {:.4f}, "
        "sparsity {:.4f}\n",
        d->documents, d->recall_min, d->recall_mean, d->sparsity);
  }
  std::string chosen;
  if (job.auto_choice) {
    for (const auto& line :
         auto_choice_lines(fmt::format("auto (one layer simulated on {})", job.config.hardware), *job.auto_choice)) {
      chosen += line + "\n";
    }
  }
  return fmt::format("{} / {}: {} tasks, {} messages, planned imbalance {:.3f} (packed {:.3f})\n{}{}{}", m.planner,
                     m.mode, job.tasks, job.messages, job.planned_imbalance, job.packed_imbalance, chosen, dynamic,
                     t.to_string());
}

std::string run_comparison_table(std::span<const studies::JobResult> jobs) {
  // The columns are the keys of run_json's runs.
  Table t({"planner", "mode", "attention_s_max", "attention_s_mean", "imbalance", "imbalance_cpu", "comm_s",
           "exposed_comm_s", "overlap", "relative_error_max"});
  for (const auto& job : jobs) {
    const RunMetrics m = run_metrics(job);
    t.add_row({m.planner, m.mode, seconds(largest(m.attention_s)), seconds(sum(m.attention_s) / job.ranks),
               fmt::format("{:.3f}", m.imbalance), fmt::format("{:.3f}", m.imbalance_cpu), seconds(m.comm_total_s),
               seconds(m.exposed_total_s), fmt::format("{:.3f}", m.overlap), error_text(m.max_error)});
  }
  return t.to_string();
}

std::string step_balance_table(std::span<const studies::JobResult> jobs) {
  // The columns are the paths of run_json's `steps` keys.
  Table t({"planner", "steps", "flops.worker", "flops.step_mean", "flops.step_sync", "active_tiles.worker",
           "active_tiles.step_sync", "attention_s.worker", "attention_s.step_mean", "attention_s.step_sync"});
  auto f3 = [](double x) { return fmt::format("{:.3f}", x); };
  for (const auto& job : jobs) {
    const auto flops = step_balance(job.step_flops), tiles = step_balance(job.step_active_tiles),
               time = step_balance(job.step_attention_s);
    t.add_row({job.config.planner, std::to_string(job.step_flops.empty() ? 0 : job.step_flops.front().size()),
               f3(flops.worker), f3(flops.step_mean), f3(flops.step_sync), f3(tiles.worker), f3(tiles.step_sync),
               f3(time.worker), f3(time.step_mean), f3(time.step_sync)});
  }
  return t.to_string();
}

namespace {

nlohmann::json balance_json(const StepMatrix& table) {
  const StepBalance b = step_balance(table);
  return {{"per_rank_step", table}, {"worker", b.worker}, {"step_mean", b.step_mean}, {"step_sync", b.step_sync}};
}

}  // namespace

nlohmann::json run_json(std::span<const studies::JobResult> jobs) {
  nlohmann::json runs = nlohmann::json::array();
  for (const auto& job : jobs) {
    const RunMetrics m = run_metrics(job);
    nlohmann::json ranks = nlohmann::json::array();
    for (int r = 0; r < job.ranks; ++r) {
      const auto &f = job.forward[r], &b = job.backward[r];
      auto pass = [](const runtime::RankSummary& s, double idle) {
        return nlohmann::json{{"attention_s", s.attention_s},
                              {"attention_cpu_s", s.attention_cpu_s},
                              {"other_compute_s", s.other_compute_s},
                              {"comm_s", s.comm_s},
                              {"exposed_comm_s", s.exposed_comm_s},
                              {"peer_wait_s", s.peer_wait_s},
                              {"end_idle_s", idle},
                              {"total_s", s.total_s},
                              {"bytes_sent", whole(s.bytes_sent)},
                              {"bytes_received", whole(s.bytes_received)},
                              {"flops", s.flops}};
      };
      ranks.push_back({{"rank", r},
                       {"attention_s", m.attention_s[r]},
                       {"attention_cpu_s", m.attention_cpu_s[r]},
                       {"comm_s", m.comm_s[r]},
                       {"exposed_comm_s", m.exposed_comm_s[r]},
                       {"idle_s", m.idle_s[r]},
                       {"bytes_sent", whole(m.bytes_sent[r])},
                       {"forward", pass(f, job.forward_idle_s[r])},
                       {"backward", pass(b, job.backward_idle_s[r])}});
    }
    nlohmann::json errors;
    for (std::size_t t = 0; t < runtime::ErrorParts::kNames.size(); ++t) {
      errors[runtime::ErrorParts::kNames[t]] = job.relative_error[t];
    }
    runs.push_back(
        {{"planner", m.planner},
         {"mode", m.mode},
         {"ranks", job.ranks},
         {"dataset", job.config.dataset},
         {"boundary_split", to_string(job.config.boundary_split)},
         {"model", job.config.model},
         {"mask", job.config.mask},
         {"tokens_per_rank", job.config.tokens_per_rank},
         {"seed", job.config.seed},
         {"reference", runtime::to_string(job.config.reference)},
         {"tasks", job.tasks},
         {"messages", job.messages},
         {"planned_imbalance", job.planned_imbalance},
         {"packed_imbalance", job.packed_imbalance},
         {"attention_s_max", largest(m.attention_s)},
         {"attention_s_mean", sum(m.attention_s) / job.ranks},
         {"imbalance", m.imbalance},
         {"imbalance_cpu", m.imbalance_cpu},
         {"comm_s", m.comm_total_s},
         {"exposed_comm_s", m.exposed_total_s},
         {"overlap", m.overlap},
         {"relative_error", errors},
         {"relative_error_max", m.max_error},
         {"dynamic_masks", job.dynamic_masks ? nlohmann::json{{"documents", job.dynamic_masks->documents},
                                                              {"recall_min", job.dynamic_masks->recall_min},
                                                              {"recall_mean", job.dynamic_masks->recall_mean},
                                                              {"sparsity", job.dynamic_masks->sparsity}}
                                             : nlohmann::json()},
         {"steps",
          {{"flops", balance_json(job.step_flops)},
           {"active_tiles", balance_json(job.step_active_tiles)},
           {"bytes_sent", balance_json(job.step_bytes)},
           {"attention_s", balance_json(job.step_attention_s)}}},
         {"per_rank", ranks}});
    if (job.auto_choice) {
      runs.back()["auto"] = job.auto_choice->to_json();
      runs.back()["hardware"] = job.config.hardware;
    }
  }
  nlohmann::json out = report_object();
  out["runs"] = std::move(runs);
  return out;
}

BarChart attention_chart(std::span<const studies::JobResult> jobs) {
  // CPU time, not wall time: the ranks time-share the cores of an oversubscribed machine.
  BarChart chart{"Core-attention CPU time per rank (forward + backward)",
                 "attention CPU time (ms)",
                 "rank",
                 {},
                 {"attention"},
                 {{"", {}}}};
  auto& groups = chart.panels.front().groups;
  for (int r = 0; !jobs.empty() && r < jobs.front().ranks; ++r) groups.push_back({std::to_string(r), {}});
  for (const auto& job : jobs) {
    const RunMetrics m = run_metrics(job);
    FULCRUM_CHECK(m.attention_cpu_s.size() == groups.size(), "every job of a chart runs on the same ranks");
    chart.bar_names.push_back(fmt::format("{} ({})", m.planner, m.mode));
    for (std::size_t r = 0; r < groups.size(); ++r) groups[r].bars.push_back({m.attention_cpu_s[r] * 1e3});
  }
  return chart;
}

}  // namespace fulcrum

#include "fulcrum/report/simulate_report.hpp"

#include "fulcrum/report/auto_choice_report.hpp"
#include "fulcrum/report/report_json.hpp"
#include "fulcrum/report/table.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <span>

namespace fulcrum {
namespace {

std::string point_label(const studies::StudyRow& row) {
  std::string label;
  for (const auto& [key, value] : row.point) label += fmt::format("{}{}={}", label.empty() ? "" : " ", key, value);
  return label.empty() ? "base" : label;
}

std::string planner_label(const sim::TrainingResult& r) {
  return studies::overlaps_traffic(r.config.planner) ? fmt::format("{}/{}", r.config.planner, to_string(r.config.mode))
                                                     : r.config.planner;
}

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// Past this many points a study with several sweep keys is drawn as small multiples.
constexpr std::size_t kPointsInOnePanel = 6;

std::string key_values(std::span<const std::pair<std::string, std::string>> point) {
  std::string label;
  for (const auto& [key, value] : point) label += fmt::format("{}{}={}", label.empty() ? "" : " ", key, value);
  return label;
}

// Index of `name` in `names`, appended when new (first-seen order is the chart's order).
std::size_t index_of(std::vector<std::string>& names, const std::string& name) {
  const auto at = std::find(names.begin(), names.end(), name);
  if (at != names.end()) return static_cast<std::size_t>(at - names.begin());
  names.push_back(name);
  return names.size() - 1;
}

// The one chart layout of a study: a group per point, a bar per planner, `values(row)` the bar's segments
// (one per chart.segment_names); a point a planner did not run at draws as zero. A group whose point has
// planners that do not fit in memory names them under its label ("OOM: ..."): their speedup bars are zero
// and their time bars are what the run would take if it fitted.
BarChart study_chart(const studies::Study& study, BarChart chart,
                     const std::function<std::vector<double>(const studies::StudyRow&)>& values) {
  std::vector<std::string> points;
  for (const auto& row : study.rows) {
    index_of(points, point_label(row));
    index_of(chart.bar_names, planner_label(row.result));
  }
  const bool facets = points.size() > kPointsInOnePanel && !study.rows.empty() && study.rows[0].point.size() > 1;
  std::vector<std::string> panel_titles;
  std::vector<std::vector<std::string>> group_labels;
  std::vector<std::pair<std::size_t, std::size_t>> where;  // per row: panel, group
  for (const auto& row : study.rows) {
    const std::span<const std::pair<std::string, std::string>> point(row.point);
    const std::size_t panel = index_of(panel_titles, facets ? key_values(point.first(1)) : "");
    group_labels.resize(panel_titles.size());
    where.emplace_back(panel, index_of(group_labels[panel], facets ? key_values(point.subspan(1)) : point_label(row)));
  }
  const std::vector<double> zeros(chart.segment_names.size(), 0.0);
  for (std::size_t p = 0; p < panel_titles.size(); ++p) {
    chart.panels.push_back({panel_titles[p], {}});
    for (const auto& label : group_labels[p]) {
      chart.panels.back().groups.push_back({label, std::vector<std::vector<double>>(chart.bar_names.size(), zeros)});
    }
  }
  std::vector<std::vector<std::vector<std::string>>> out_of_memory(panel_titles.size());  // [panel][group]
  for (std::size_t p = 0; p < panel_titles.size(); ++p) out_of_memory[p].resize(group_labels[p].size());
  for (std::size_t i = 0; i < study.rows.size(); ++i) {
    const auto& row = study.rows[i];
    const std::size_t bar = index_of(chart.bar_names, planner_label(row.result));
    chart.panels[where[i].first].groups[where[i].second].bars[bar] = values(row);
    if (row.result.memory.out_of_memory()) {
      out_of_memory[where[i].first][where[i].second].push_back(planner_label(row.result));
    }
  }
  for (std::size_t p = 0; p < panel_titles.size(); ++p) {
    for (std::size_t g = 0; g < group_labels[p].size(); ++g) {
      const auto& planners = out_of_memory[p][g];
      if (!planners.empty()) chart.panels[p].groups[g].label += fmt::format(" (OOM: {})", fmt::join(planners, ", "));
    }
  }
  return chart;
}

}  // namespace

std::string study_table(const studies::Study& study) {
  // The columns are study_json's keys (a nested one by its last part; memory shows memory.total_bytes,
  // layout the keys tp, dp, pp, cp and microbatches), so a reader of either finds the other.
  Table table({"point", "planner", "layout", "mean_iteration_s", "speedup", "tokens_per_s", "linear_s", "attention_s",
               "exposed_comm_s", "idle_s", "dp_sync_s", "attention_imbalance", "step_sync", "attention_bytes", "memory",
               "out_of_memory"});
  for (const auto& row : study.rows) {
    const auto& r = row.result;
    const auto& b = r.breakdown;
    table.add_row(
        {point_label(row), planner_label(r), r.config.parallel.to_string(), fmt::format("{:.3f}", r.mean_iteration_s),
         row.speedup ? fmt::format("{:.3f}", *row.speedup) : row.no_speedup_reason(),
         fmt::format("{:.0f}", r.tokens_per_s), fmt::format("{:.3f}", b.linear_s), fmt::format("{:.3f}", b.attention_s),
         fmt::format("{:.3f}", b.exposed_comm_s), fmt::format("{:.3f}", b.idle_s), fmt::format("{:.3f}", b.dp_sync_s),
         fmt::format("{:.3f}", r.attention_imbalance), fmt::format("{:.3f}", r.step_attention.step_sync),
         format_bytes(r.attention_bytes), fmt::format("{:.1f} GiB", r.memory.total_bytes() / kGiB),
         r.memory.out_of_memory() ? "YES" : "no"});
  }
  return table.to_string() + fmt::format(
                                 "speedup: the row's tokens/s over {}'s at the same point (OOM: the row does not fit "
                                 "in memory; ref OOM: the reference does not); time columns in seconds per iteration "
                                 "for an average GPU\n",
                                 study.reference);
}

std::vector<std::string> study_warnings(const studies::Study& study) {
  std::vector<std::string> lines;
  for (const auto& row : study.rows) {
    const auto& r = row.result;
    if (r.unhidden_planning_s > kUnhiddenPlanningWarningShare * r.mean_iteration_s) {
      lines.push_back(fmt::format(
          "{} at {}: planning takes {:.3g} s per iteration on this machine, {:.3g} s more on average than the "
          "{:.3g} s iteration it would be hidden behind; tokens/s does not count it",
          planner_label(r), point_label(row), r.planning_s, r.unhidden_planning_s, r.mean_iteration_s));
    }
    const double carried = 1 - r.computed_work_share;  // > 0: the queue grew
    if (std::abs(carried) <= kCarriedWorkWarningShare) continue;
    const bool reference = r.config.planner == study.reference;
    // What a queue carries is bounded, so its share of the window falls as 1 / iterations.
    const int n = r.config.iterations;
    const int enough = static_cast<int>(std::min(1000.0, std::ceil(n * std::abs(carried) / kCarriedWorkWarningShare)));
    lines.push_back(fmt::format(
        "{} at {}: its queue of deferred documents {} {:.0f}% of the window's work over {} iteration{}, so its "
        "tokens/s{} rests on a rate measured on other documents than those drawn; give --iterations {} or more",
        planner_label(r), point_label(row), carried > 0 ? "took in" : "gave out", 100 * std::abs(carried), n,
        n == 1 ? "" : "s", reference ? " and every speedup at this point (it is the reference)" : "", enough));
  }
  return lines;
}

std::vector<std::string> study_auto_lines(const studies::Study& study) {
  std::vector<std::string> lines;
  for (const auto& row : study.rows) {
    if (!row.result.auto_choice) continue;
    const auto more = auto_choice_lines(fmt::format("{} at {}", planner_label(row.result), point_label(row)),
                                        *row.result.auto_choice);
    lines.insert(lines.end(), more.begin(), more.end());
  }
  return lines;
}

std::string study_csv(const studies::Study& study) {
  std::string out =
      "point,planner,mode,gpus,tp,dp,pp,cp,microbatches,tokens_per_rank,mean_iteration_s,speedup,tokens_per_s,"
      "linear_s,attention_s,exposed_comm_s,idle_s,dp_sync_s,attention_imbalance,attention_bytes,"
      "memory_bytes,out_of_memory\n";
  for (const auto& row : study.rows) {
    const auto& r = row.result;
    const auto& c = r.config;
    const auto& b = r.breakdown;
    out += fmt::format(
        "\"{}\",{},{},{},{},{},{},{},{},{},{:.6g},{},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g}"
        ",{}\n",
        point_label(row), c.planner, to_string(c.mode), c.parallel.gpus, c.parallel.tp, c.parallel.dp(), c.parallel.pp,
        c.parallel.cp, c.parallel.microbatch_count(), c.rank_tokens(), r.mean_iteration_s,
        row.speedup ? fmt::format("{:.6g}", *row.speedup) : "", r.tokens_per_s, b.linear_s, b.attention_s,
        b.exposed_comm_s, b.idle_s, b.dp_sync_s, r.attention_imbalance, r.attention_bytes, r.memory.total_bytes(),
        r.memory.out_of_memory());
  }
  return out;
}

nlohmann::json study_json(const studies::Study& study) {
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& row : study.rows) {
    nlohmann::json j = row.result.to_json();
    j["point"] = point_label(row);
    j["speedup"] = row.speedup ? nlohmann::json(*row.speedup) : nlohmann::json(nullptr);
    rows.push_back(std::move(j));
  }
  nlohmann::json out = report_object();
  out["reference"] = study.reference;
  out["search"] = study.spec.search;
  out["rows"] = std::move(rows);
  return out;
}

BarChart study_speedup_chart(const studies::Study& study) {
  return study_chart(study,
                     {fmt::format("Speedup over {} (simulated, {})", study.reference, study.spec.hardware),
                      fmt::format("speedup over {} (tokens/s ratio)", study.reference),
                      "",
                      {},
                      {"speedup"},
                      {}},
                     [](const studies::StudyRow& row) { return std::vector<double>{row.speedup.value_or(0.0)}; });
}

BarChart study_breakdown_chart(const studies::Study& study) {
  return study_chart(
      study,
      {fmt::format("Where an average GPU's iteration goes (simulated, {})", study.spec.hardware),
       "time per iteration (s)",
       "",
       {},
       {"linear", "attention", "exposed comm", "idle", "dp sync"},
       {}},
      [](const studies::StudyRow& row) {
        const auto& b = row.result.breakdown;
        return std::vector<double>{b.linear_s, b.attention_s, b.exposed_comm_s, std::max(0.0, b.idle_s), b.dp_sync_s};
      });
}

}  // namespace fulcrum

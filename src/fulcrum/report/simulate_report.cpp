#include "fulcrum/report/simulate_report.hpp"

#include "fulcrum/report/table.hpp"

#include <fmt/format.h>

#include <map>

namespace fulcrum {
namespace {

std::string point_label(const studies::StudyRow& row) {
  std::string label;
  for (const auto& [key, value] : row.point) label += fmt::format("{}{}={}", label.empty() ? "" : " ", key, value);
  return label.empty() ? "base" : label;
}

std::string system_label(const sim::TrainingResult& r) {
  return studies::overlaps_traffic(r.config.system) ? fmt::format("{}/{}", r.config.system, to_string(r.config.mode))
                                                    : r.config.system;
}

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

}  // namespace

std::string study_table(const studies::Study& study) {
  Table table({"point", "system", "layout", "iteration s", "speedup", "Mtok/s", "linear", "attention", "exposed",
               "idle", "dp sync", "attn imb", "step sync", "traffic", "GiB/GPU", "fits"});
  for (const auto& row : study.rows) {
    const auto& r = row.result;
    const auto& b = r.breakdown;
    table.add_row({point_label(row), system_label(r), r.config.parallel.to_string(),
                   fmt::format("{:.3f}", r.mean_iteration_s), fmt::format("{:.3f}", row.speedup),
                   fmt::format("{:.3f}", r.tokens_per_s / 1e6), fmt::format("{:.3f}", b.linear_s),
                   fmt::format("{:.3f}", b.attention_s), fmt::format("{:.3f}", b.exposed_comm_s),
                   fmt::format("{:.3f}", b.idle_s), fmt::format("{:.3f}", b.dp_sync_s),
                   fmt::format("{:.3f}", r.attention_imbalance), fmt::format("{:.3f}", r.step_attention.step_sync),
                   format_bytes(r.attention_bytes), fmt::format("{:.1f}", r.memory.total_bytes() / kGiB),
                   r.memory.out_of_memory() ? "OOM" : "yes"});
  }
  return table.to_string() + fmt::format(
                                 "speedup: the row's tokens/s over {}'s at the same point; time columns in seconds per "
                                 "iteration for an average GPU\n",
                                 study.reference);
}

std::string study_csv(const studies::Study& study) {
  std::string out =
      "point,system,mode,gpus,tp,dp,pp,cp,microbatches,tokens_per_rank,iteration_s,speedup,tokens_per_s,"
      "linear_s,attention_s,exposed_comm_s,idle_s,dp_sync_s,attention_imbalance,attention_bytes,"
      "memory_bytes,out_of_memory\n";
  for (const auto& row : study.rows) {
    const auto& r = row.result;
    const auto& c = r.config;
    const auto& b = r.breakdown;
    out += fmt::format(
        "\"{}\",{},{},{},{},{},{},{},{},{},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g}"
        ",{}\n",
        point_label(row), c.system, to_string(c.mode), c.parallel.gpus, c.parallel.tp, c.parallel.dp(), c.parallel.pp,
        c.parallel.cp, c.parallel.microbatch_count(), c.rank_tokens(), r.mean_iteration_s, row.speedup, r.tokens_per_s,
        b.linear_s, b.attention_s, b.exposed_comm_s, b.idle_s, b.dp_sync_s, r.attention_imbalance, r.attention_bytes,
        r.memory.total_bytes(), r.memory.out_of_memory());
  }
  return out;
}

nlohmann::json study_json(const studies::Study& study) {
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& row : study.rows) {
    nlohmann::json j = row.result.to_json();
    j["point"] = point_label(row);
    j["speedup"] = row.speedup;
    rows.push_back(std::move(j));
  }
  return {{"reference", study.reference}, {"search", study.spec.search}, {"rows", rows}};
}

BarChart study_speedup_chart(const studies::Study& study) {
  BarChart chart{fmt::format("Speedup over {} (simulated, {})", study.reference, study.spec.hardware),
                 fmt::format("tokens/s over {}'s", study.reference),
                 {},
                 {}};
  std::map<std::string, std::size_t> series, categories;
  for (const auto& row : study.rows) {
    if (categories.try_emplace(point_label(row), chart.categories.size()).second)
      chart.categories.push_back(point_label(row));
    const auto name = system_label(row.result);
    if (series.try_emplace(name, chart.series.size()).second) chart.series.push_back({name, {}});
  }
  for (auto& s : chart.series) s.values.assign(chart.categories.size(), 0);
  for (const auto& row : study.rows) {
    chart.series[series[system_label(row.result)]].values[categories[point_label(row)]] = row.speedup;
  }
  return chart;
}

BarChart study_breakdown_chart(const studies::Study& study) {
  BarChart chart{"Where an average GPU's iteration goes (simulated)", "seconds per iteration", {}, {}};
  const char* parts[] = {"linear", "attention", "exposed comm", "idle", "dp sync"};
  for (const char* p : parts) chart.series.push_back({p, {}});
  for (const auto& row : study.rows) {
    chart.categories.push_back(fmt::format("{} {}", system_label(row.result), point_label(row)));
    const auto& b = row.result.breakdown;
    const double values[] = {b.linear_s, b.attention_s, b.exposed_comm_s, std::max(0.0, b.idle_s), b.dp_sync_s};
    for (std::size_t i = 0; i < chart.series.size(); ++i) chart.series[i].values.push_back(values[i]);
  }
  return chart;
}

}  // namespace fulcrum

#include "prefill_output.hpp"

#include "fulcrum/report/report_json.hpp"
#include "fulcrum/report/table.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace fulcrum::cli {
namespace {

std::string ms(double seconds) { return fmt::format("{:.2f}", seconds * 1e3); }
// Predictions from the analytic model (H100-class rates) are microseconds on a CPU-sized model: significant
// digits rather than fixed decimals.
std::string ms_g(double seconds) { return fmt::format("{:.4g}", seconds * 1e3); }
std::string mb(double bytes) { return fmt::format("{:.1f}", bytes / 1e6); }
std::string on_off(bool value) { return value ? "on" : "off"; }
std::string config_name(const PrefillConfigResult& r) {
  return fmt::format("solver {}, WPR {}, CPIP {}", r.plan.solver, on_off(r.wpr), on_off(r.cpip));
}

// The slowest rank's measured time of one layer: attention alone, and attention + projections (what the
// cost model's T_layer prices: t_attn plus t_qkvo / t_qo per head).
double max_rank(const prefill::PrefillReport& report, std::size_t layer, bool with_projection) {
  double out = 0;
  for (const auto& rank : report.times) {
    const auto& t = rank[layer];
    out = std::max(out, t.attention_s + (with_projection ? t.projection_s : 0.0));
  }
  return out;
}

// Per layer: the plan's prediction beside what was measured.
std::string predicted_table(const PrefillConfigResult& result) {
  const auto& report = result.report;
  Table table({"layer", "predicted T_layer ms", "lower bound ms", "predicted spread", "attention ms (max rank)",
               "attention+projection ms (max rank)", "attention spread"});
  for (std::size_t l = 0; l < report.times.front().size(); ++l) {
    const auto& predicted = result.plan.predicted[l];
    table.add_row({std::to_string(l), ms_g(predicted.layer_s()), ms_g(result.plan.lower_bound_s[l]),
                   fmt::format("{:.3f}", predicted.spread()), ms(max_rank(report, l, false)),
                   ms(max_rank(report, l, true)), fmt::format("{:.3f}", report.attention_spread(static_cast<int>(l)))});
  }
  return table.to_string();
}

std::string rank_layer_table(const PrefillConfigResult& result) {
  const auto& report = result.report;
  Table table(
      {"rank", "layer", "attention ms", "projection ms", "mlp ms", "all-reduce ms", "prefetch wait ms", "weights MB"});
  for (int r = 0; r < report.ranks; ++r) {
    const auto& layers = report.times[static_cast<std::size_t>(r)];
    for (std::size_t l = 0; l < layers.size(); ++l) {
      const auto& t = layers[l];
      table.add_row({std::to_string(r), std::to_string(l), ms(t.attention_s), ms(t.projection_s), ms(t.mlp_s),
                     ms(t.all_reduce_s), ms(t.prefetch_wait_s), mb(t.weight_bytes)});
    }
    const auto t = report.rank_total(r);
    table.add_row({std::to_string(r), "all", ms(t.attention_s), ms(t.projection_s), ms(t.mlp_s), ms(t.all_reduce_s),
                   ms(t.prefetch_wait_s), mb(t.weight_bytes)});
  }
  std::string spreads;
  for (std::size_t l = 0; l < report.times.front().size(); ++l) {
    spreads += fmt::format("{}{:.3f}", l == 0 ? "" : " ", report.attention_spread(static_cast<int>(l)));
  }
  return fmt::format("{} ({} repeat{}, medians)\n{}attention spread (max-min)/max per layer: {}\n{}",
                     config_name(result), result.repeats, result.repeats == 1 ? "" : "s", table.to_string(), spreads,
                     predicted_table(result));
}

}  // namespace

std::string prefill_text(const PrefillRunInfo& info, const std::vector<PrefillConfigResult>& results) {
  std::string out = fmt::format("prefill: model {}, {} tokens, {} ranks, patterns {}, costs {}, weights {}\n\n",
                                info.model, info.tokens, info.ranks, info.patterns, info.costs, info.weights);
  for (const auto& r : results) out += rank_layer_table(r) + "\n";
  Table table({"solver", "WPR", "CPIP", "latency ms", "tokens/s", "attention ms (max rank)", "projection ms (max rank)",
               "prefetch wait ms (max rank)", "weights MB (max rank)", "mean spread", "predicted Σ T_layer ms",
               "solve ms", "max rel. error"});
  for (const auto& r : results) {
    double attention = 0, projection = 0, wait = 0, bytes = 0;
    for (int k = 0; k < r.report.ranks; ++k) {
      const auto t = r.report.rank_total(k);
      attention = std::max(attention, t.attention_s);
      projection = std::max(projection, t.projection_s);
      wait = std::max(wait, t.prefetch_wait_s);
      bytes = std::max(bytes, t.weight_bytes);
    }
    table.add_row({r.plan.solver, on_off(r.wpr), on_off(r.cpip), ms(r.report.latency_s()),
                   fmt::format("{:.0f}", r.report.tokens_per_s()), ms(attention), ms(projection), ms(wait), mb(bytes),
                   fmt::format("{:.3f}", r.report.mean_attention_spread()), ms_g(r.plan.predicted_total_s()),
                   fmt::format("{:.3f}", r.plan.solve_s * 1e3),
                   r.max_error ? fmt::format("{:.2e}", *r.max_error) : "-"});
  }
  out += table.to_string();
  for (const auto& r : results) {
    if (!r.max_error) continue;
    out += fmt::format("check {}: max relative error {:.2e} (tolerance {:.1e}): {}\n", config_name(r), *r.max_error,
                       info.tolerance, *r.max_error <= info.tolerance ? "pass" : "FAIL");
  }
  return out;
}

nlohmann::json prefill_json(const PrefillRunInfo& info, const std::vector<PrefillConfigResult>& results) {
  nlohmann::json configs = nlohmann::json::array();
  for (const auto& r : results) {
    nlohmann::json layers = nlohmann::json::array();
    for (std::size_t l = 0; l < r.report.times.front().size(); ++l) {
      nlohmann::json ranks = nlohmann::json::array();
      for (const auto& rank : r.report.times) {
        const auto& t = rank[l];
        ranks.push_back({{"attention_s", t.attention_s},
                         {"projection_s", t.projection_s},
                         {"mlp_s", t.mlp_s},
                         {"all_reduce_s", t.all_reduce_s},
                         {"prefetch_wait_s", t.prefetch_wait_s},
                         {"weight_bytes", t.weight_bytes}});
      }
      const auto& predicted = r.plan.predicted[l];
      layers.push_back({{"attention_spread", r.report.attention_spread(static_cast<int>(l))},
                        {"predicted_layer_s", predicted.layer_s()},
                        {"predicted_rank_s", predicted.time_s},
                        {"predicted_spread", predicted.spread()},
                        {"lower_bound_s", r.plan.lower_bound_s[l]},
                        {"assignment", r.plan.assignment[l]},
                        {"ranks", ranks}});
    }
    nlohmann::json config = {{"solver", r.plan.solver},
                             {"solve_s", r.plan.solve_s},
                             {"predicted_total_s", r.plan.predicted_total_s()},
                             {"wpr", r.wpr},
                             {"cpip", r.cpip},
                             {"repeats", r.repeats},
                             {"latency_s", r.report.latency_s()},
                             {"tokens_per_s", r.report.tokens_per_s()},
                             {"mean_attention_spread", r.report.mean_attention_spread()},
                             {"rank_total_s", r.report.total_s},
                             {"layers", layers}};
    if (r.max_error) {
      config["max_relative_error"] = *r.max_error;
      config["check_passed"] = *r.max_error <= info.tolerance;
    }
    configs.push_back(config);
  }
  return {{"schema_version", kReportSchemaVersion},
          {"model", info.model},
          {"tokens", info.tokens},
          {"ranks", info.ranks},
          {"patterns", info.patterns},
          {"costs", info.costs},
          {"weights", info.weights},
          {"tolerance", info.tolerance},
          {"configs", configs}};
}

}  // namespace fulcrum::cli

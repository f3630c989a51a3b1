#include "prefill_output.hpp"

#include "fulcrum/report/table.hpp"

#include <fmt/format.h>

namespace fulcrum::cli {
namespace {

std::string ms(double seconds) { return fmt::format("{:.2f}", seconds * 1e3); }
std::string mb(double bytes) { return fmt::format("{:.1f}", bytes / 1e6); }
std::string on_off(bool value) { return value ? "on" : "off"; }
std::string config_name(const PrefillConfigResult& r) {
  return fmt::format("WPR {}, CPIP {}", on_off(r.wpr), on_off(r.cpip));
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
  return fmt::format("{} ({} repeat{}, medians)\n{}attention spread (max-min)/max per layer: {}\n", config_name(result),
                     result.repeats, result.repeats == 1 ? "" : "s", table.to_string(), spreads);
}

}  // namespace

std::string prefill_text(const PrefillRunInfo& info, const std::vector<PrefillConfigResult>& results) {
  std::string out = fmt::format("prefill: model {}, {} tokens, {} ranks, patterns {}, assignment {}, weights {}\n\n",
                                info.model, info.tokens, info.ranks, info.patterns, info.assignment, info.weights);
  for (const auto& r : results) out += rank_layer_table(r) + "\n";
  Table table({"WPR", "CPIP", "latency ms", "tokens/s", "attention ms (max rank)", "projection ms (max rank)",
               "prefetch wait ms (max rank)", "weights MB (max rank)", "mean spread", "max rel. error"});
  for (const auto& r : results) {
    double attention = 0, projection = 0, wait = 0, bytes = 0;
    for (int k = 0; k < r.report.ranks; ++k) {
      const auto t = r.report.rank_total(k);
      attention = std::max(attention, t.attention_s);
      projection = std::max(projection, t.projection_s);
      wait = std::max(wait, t.prefetch_wait_s);
      bytes = std::max(bytes, t.weight_bytes);
    }
    table.add_row({on_off(r.wpr), on_off(r.cpip), ms(r.report.latency_s()),
                   fmt::format("{:.0f}", r.report.tokens_per_s()), ms(attention), ms(projection), ms(wait), mb(bytes),
                   fmt::format("{:.3f}", r.report.mean_attention_spread()),
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
      layers.push_back({{"attention_spread", r.report.attention_spread(static_cast<int>(l))}, {"ranks", ranks}});
    }
    nlohmann::json config = {{"wpr", r.wpr},
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
  return {{"model", info.model},           {"tokens", info.tokens},
          {"ranks", info.ranks},           {"patterns", info.patterns},
          {"assignment", info.assignment}, {"weights", info.weights},
          {"tolerance", info.tolerance},   {"configs", configs}};
}

}  // namespace fulcrum::cli

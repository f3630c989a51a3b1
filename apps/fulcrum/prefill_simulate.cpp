#include "prefill_simulate.hpp"

#include "fulcrum/core/error.hpp"
#include "fulcrum/cost/hardware_model.hpp"
#include "fulcrum/planners/heads/scenarios.hpp"
#include "fulcrum/report/report_json.hpp"
#include "fulcrum/report/table.hpp"
#include "fulcrum/sim/prefill.hpp"
#include "fulcrum/workload/model_config.hpp"
#include "outputs.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>

namespace fulcrum::cli {
namespace {

std::string ms(double seconds) { return fmt::format("{:.2f}", seconds * 1e3); }
std::string on_off(bool value) { return value ? "on" : "off"; }
std::string config_name(const sim::PrefillSimResult& r) {
  return fmt::format("{} W{} C{}", r.solver, r.wpr ? 1 : 0, r.cpip ? 1 : 0);
}

// Per layer, one column per configuration: T_layer and the spread of the per-device attention blocks.
std::string layer_table(const std::vector<sim::PrefillSimResult>& results) {
  std::vector<std::string> header{"layer"};
  for (const auto& r : results) header.push_back(config_name(r) + " T_layer ms (spread)");
  Table table(std::move(header));
  for (std::size_t l = 0; l < results.front().layers.size(); ++l) {
    std::vector<std::string> row{std::to_string(l)};
    for (const auto& r : results) {
      row.push_back(fmt::format("{} ({:.3f})", ms(r.layers[l].layer_s), r.layers[l].spread));
    }
    table.add_row(std::move(row));
  }
  return table.to_string();
}

// The slowest device's attention (heads alone) and attention + projections, summed over layers.
double sum_max(const sim::PrefillSimResult& r, bool with_projection) {
  double total = 0;
  for (const auto& l : r.layers) {
    const auto& v = with_projection ? l.block_s : l.attention_s;
    total += *std::max_element(v.begin(), v.end());
  }
  return total;
}

std::string summary_table(const std::vector<sim::PrefillSimResult>& results) {
  Table table({"solver", "WPR", "CPIP", "latency ms", "tokens/s", "mean T_layer ms", "Σ max attention ms",
               "Σ max attention+proj ms", "mean spread", "max spread", "all-reduces ms", "first load ms", "solve ms"});
  for (const auto& r : results) {
    double all_reduce = 0;
    for (const auto& l : r.layers) all_reduce += 2 * l.all_reduce_s;
    table.add_row({r.solver, on_off(r.wpr), on_off(r.cpip), ms(r.latency_s), fmt::format("{:.0f}", r.tokens_per_s),
                   ms((r.latency_s - r.first_load_s) / static_cast<double>(r.layers.size())), ms(sum_max(r, false)),
                   ms(sum_max(r, true)), fmt::format("{:.3f}", r.mean_spread()), fmt::format("{:.3f}", r.max_spread()),
                   ms(all_reduce), ms(r.first_load_s), ms(r.solve_s)});
  }
  return table.to_string();
}

}  // namespace

int run_prefill_simulation(const PrefillSimArgs& args) {
  const HardwareModel hw = load_hardware(args.hardware);
  const ModelShape shape = resolve_model_shape(args.model);
  if (args.tokens < 1 || args.tokens > (1L << 24)) fail("tokens = {}: must be in [1, {}]", args.tokens, 1L << 24);
  if (!args.json.empty()) check_output_file("json", args.json);
  const int devices = args.ranks > 0 ? args.ranks : hw.devices_per_node;
  if (args.ranks < 0 || devices > shape.q_heads) {
    fail("ranks = {}: must be in [1, {}] (the model's q heads; 0: the preset's {} per node)", args.ranks, shape.q_heads,
         hw.devices_per_node);
  }
  const std::vector<std::string> solvers = solver_names(args.solver.empty() ? "lpt-ls" : args.solver);
  const std::vector<bool> wprs = switches(args.wpr, "wpr");
  const std::vector<bool> cpips = switches(args.cpip, "cpip");
  const auto tokens = static_cast<Tokens>(args.tokens);
  const heads::HeadPatternReport report = heads::load_head_patterns(args.patterns, shape, tokens);
  std::optional<heads::RuntimeProfile> profile;
  if (!args.profile.empty()) profile = heads::RuntimeProfile::load(args.profile);
  const auto costs =
      heads::model_layer_costs(report, shape, tokens, sim::preset_head_cost_model(shape, hw, tokens, profile));

  std::vector<sim::PrefillSimResult> results;
  for (const auto& name : solvers) {
    const heads::ModelPlan solved = heads::solve_model(name, costs, devices, args.seed);
    for (bool wpr : wprs) {
      for (bool cpip : cpips)
        results.push_back(sim::simulate_prefill(shape, hw, costs, solved, {tokens, devices, wpr, cpip}));
    }
  }
  const std::string costs_from =
      profile ? args.profile
              : fmt::format(
                    "analytic: visible pairs x 4 x head_dim FLOPs at {:.0f} TFLOP/s, projections and MLP at "
                    "{:.0f} TFLOP/s",
                    sim::preset_head_cost_model(shape, hw, tokens, std::nullopt).analytic.attention_flops_per_s / 1e12,
                    hw.peak_flops * hw.linear_mfu / 1e12);
  fmt::print("prefill simulated on {}: model {} ({} layers), {} tokens, {} devices, patterns {}, costs {}\n\n{}\n{}",
             hw.name, shape.name, shape.layers, tokens, devices, args.patterns, costs_from, layer_table(results),
             summary_table(results));
  if (!args.json.empty()) {
    nlohmann::json configs = nlohmann::json::array();
    for (const auto& r : results) configs.push_back(sim::to_json(r));
    write_output_json("json", args.json,
                      {{"schema_version", kReportSchemaVersion},
                       {"hardware", hw.name},
                       {"model", shape.name},
                       {"layers", shape.layers},
                       {"tokens", tokens},
                       {"devices", devices},
                       {"patterns", args.patterns},
                       {"costs", costs_from},
                       {"configs", configs}});
  }
  return 0;
}

}  // namespace fulcrum::cli

// `fulcrum heads`: FlexAttn's head-to-device solvers on one of the ten scenarios or a head pattern file,
// per layer: per-device time, T_layer, spread, gap to the lower bound and solve time of each solver.
#include "commands.hpp"

#include "fulcrum/core/error.hpp"
#include "fulcrum/core/text.hpp"
#include "fulcrum/planners/heads/evaluate.hpp"
#include "fulcrum/planners/heads/scenarios.hpp"
#include "fulcrum/report/report_json.hpp"
#include "fulcrum/report/table.hpp"
#include "outputs.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <memory>

namespace fulcrum::cli {
namespace {

struct HeadsConfig {
  std::string scenario;
  std::string patterns;
  std::string layer = "all";
  int devices = 0;  // 0: the scenario's
  std::string solvers;
  std::string profile;
  std::uint64_t seed = 1;
  Tokens prompt_tokens = 131072;
  int repeats = 5;
  std::string json;
};

struct Problem {
  std::string source;       // "scenario S3" or the file
  std::vector<int> layers;  // indices into the report
  heads::HeadPatternReport report;
  int devices = 0;
};

Problem load_problem(const HeadsConfig& c) {
  if (c.scenario.empty() == c.patterns.empty())
    fail("scenario / patterns: give exactly one of --scenario and --patterns");
  Problem p;
  if (!c.scenario.empty()) {
    const heads::Scenario s = heads::scenario(c.scenario, c.seed);
    p.source = fmt::format("scenario {} ({})", s.name, s.arrangement);
    p.report.q_heads = static_cast<int>(s.heads.size());
    p.report.kv_heads = s.kv_heads;
    p.report.layers = {s.heads};
    p.devices = c.devices > 0 ? c.devices : s.devices;
    if (c.layer != "all" && c.layer != "0") fail("layer = '{}': a scenario has one layer (0)", c.layer);
    p.layers = {0};
    return p;
  }
  p.report = heads::read_head_patterns(c.patterns);
  p.source = c.patterns;
  if (c.devices <= 0) fail("devices = {}: must be >= 1 (required with --patterns)", c.devices);
  p.devices = c.devices;
  const int layers = static_cast<int>(p.report.layers.size());
  if (c.layer == "all") {
    for (int l = 0; l < layers; ++l) p.layers.push_back(l);
  } else {
    int l = -1;
    try {
      std::size_t used = 0;
      l = std::stoi(c.layer, &used);
      if (used != c.layer.size()) l = -1;
    } catch (const std::exception&) {}
    if (l < 0 || l >= layers) fail("layer = '{}': must be all or a layer in [0, {}]", c.layer, layers - 1);
    p.layers = {l};
  }
  return p;
}

std::vector<const heads::HeadSolverRegistration*> solver_list(const std::string& text) {
  std::vector<const heads::HeadSolverRegistration*> out;
  for (const std::string& name : split_names(text, "solvers")) out.push_back(&heads::find_head_solver(name));
  if (out.empty()) fail("solvers = '{}': name at least one of {}", text, fmt::join(heads::head_solver_names(), ", "));
  return out;
}

std::string ms(double seconds) { return fmt::format("{:.3f}", seconds * 1e3); }

int run_heads(const HeadsConfig& c) {
  if (c.prompt_tokens < 1 || c.prompt_tokens > heads::kMaxPatternTokens) {
    fail("tokens = {}: must be in [1, {}]", c.prompt_tokens, heads::kMaxPatternTokens);
  }
  if (c.repeats < 1) fail("repeats = {}: must be >= 1", c.repeats);
  if (!c.json.empty()) check_output_file("json", c.json);
  if (c.devices < 0) fail("devices = {}: must be >= 1", c.devices);
  const auto solvers = solver_list(c.solvers);
  const Problem p = load_problem(c);
  heads::HeadCostModel model;
  if (!c.profile.empty()) model.profile = heads::RuntimeProfile::load(c.profile);

  nlohmann::json json = {{"schema_version", kReportSchemaVersion},
                         {"source", p.source},
                         {"devices", p.devices},
                         {"prompt_tokens", c.prompt_tokens},
                         {"seed", c.seed},
                         {"q_heads", p.report.q_heads},
                         {"kv_heads", p.report.kv_heads},
                         {"costs", c.profile.empty() ? "analytic" : c.profile}};
  fmt::print("{}: {} q heads, {} KV heads, {} device(s), {} prompt tokens, costs {}\n", p.source, p.report.q_heads,
             p.report.kv_heads, p.devices, c.prompt_tokens, c.profile.empty() ? "analytic" : c.profile);
  // Per solver over the layers: Σ T_layer, the worst gap, Σ solve time.
  std::vector<double> total_s(solvers.size(), 0), worst_gap(solvers.size(), 0), solve_s(solvers.size(), 0),
      spread_sum(solvers.size(), 0);
  double bound_total = 0;
  nlohmann::json layers = nlohmann::json::array();
  for (int l : p.layers) {
    const auto& patterns = p.report.layers[static_cast<std::size_t>(l)];
    const heads::LayerCosts costs = model.layer(patterns, p.report.kv_heads, c.prompt_tokens);
    nlohmann::json layer = {{"layer", l}, {"solvers", nlohmann::json::object()}};
    Table table({"solver", "T_layer ms", "spread", "gap to LB", "solve ms", "optimal", "per-device ms"});
    for (std::size_t i = 0; i < solvers.size(); ++i) {
      const auto r = heads::run_head_solver(*solvers[i], costs, p.devices, c.seed, c.repeats);
      layer["lower_bound_s"] = r.lower_bound_s;
      layer["lower_bound_simple_s"] = r.lower_bound_simple_s;
      layer["solvers"][r.solver] = heads::to_json(r);
      total_s[i] += r.layer_s;
      worst_gap[i] = std::max(worst_gap[i], r.gap);
      solve_s[i] += r.solve_s;
      spread_sum[i] += r.spread;
      if (i == 0) bound_total += r.lower_bound_s;
      std::vector<std::string> devices;
      for (double t : r.times.time_s) devices.push_back(fmt::format("{:.2f}", t * 1e3));
      table.add_row({r.solver, ms(r.layer_s), fmt::format("{:.3f}", r.spread), fmt::format("{:.2f}%", r.gap * 100),
                     ms(r.solve_s), r.solution.proven_optimal ? "proven" : "",
                     fmt::format("{}", fmt::join(devices, " "))});
    }
    if (p.layers.size() == 1) {
      fmt::print("lower bound {} ms (max(max head, Σ/D) with GQA: {} ms)\n{}", ms(layer["lower_bound_s"]),
                 ms(layer["lower_bound_simple_s"]), table.to_string());
    }
    layers.push_back(std::move(layer));
  }
  json["layers"] = std::move(layers);
  json["solvers"] = nlohmann::json::object();
  const auto n = static_cast<double>(p.layers.size());
  Table summary({"solver", "Σ T_layer ms", "Σ lower bound ms", "mean spread", "worst gap", "Σ solve ms"});
  for (std::size_t i = 0; i < solvers.size(); ++i) {
    json["solvers"][std::string(solvers[i]->name)] = {{"total_layer_s", total_s[i]},
                                                      {"worst_gap", worst_gap[i]},
                                                      {"mean_spread", spread_sum[i] / n},
                                                      {"solve_ms", solve_s[i] * 1e3},
                                                      {"total_lower_bound_s", bound_total}};
    summary.add_row({std::string(solvers[i]->name), ms(total_s[i]), ms(bound_total),
                     fmt::format("{:.3f}", spread_sum[i] / n), fmt::format("{:.2f}%", worst_gap[i] * 100),
                     ms(solve_s[i])});
  }
  if (p.layers.size() > 1) fmt::print("{} layers\n{}", p.layers.size(), summary.to_string());
  if (!c.json.empty()) write_output_json("json", c.json, json);
  return 0;
}

}  // namespace

Action add_heads_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "heads", "Assign attention heads to devices (FlexAttn): every solver's per-device time, spread and solve time");
  auto c = std::make_shared<HeadsConfig>();
  c->solvers = fmt::format("{}", fmt::join(heads::head_solver_names(), ","));
  cmd->add_option("--scenario", c->scenario,
                  "one of the ten published layers: " + fmt::format("{}", fmt::join(heads::scenario_names(), ", ")));
  cmd->add_option("--patterns", c->patterns, "a head pattern report (JSON; docs/cli.md)");
  cmd->add_option("--layer", c->layer, "with --patterns: a layer index or all")->capture_default_str();
  cmd->add_option("--devices", c->devices, "devices (GPUs) of the tensor-parallel group; a scenario's own by default");
  cmd->add_option("--solvers", c->solvers, "comma-separated")->capture_default_str();
  cmd->add_option("--profile", c->profile, "runtime profile JSON (measured head times); analytic FLOPs without");
  cmd->add_option("--tokens", c->prompt_tokens, "prompt length in tokens")->capture_default_str();
  cmd->add_option("--seed", c->seed, "seed of random scenarios and seeded solvers")->capture_default_str();
  cmd->add_option("--repeats", c->repeats, "solves per solver and layer; the median time is reported")
      ->capture_default_str();
  add_output_option(*cmd, "json", c->json, "also write the results as JSON to this path");
  return [c] { return run_heads(*c); };
}

}  // namespace fulcrum::cli

// `fulcrum simulate`: training iterations of DistCA and the baselines on a modelled cluster.
#include "commands.hpp"

#include "fulcrum/core/error.hpp"
#include "fulcrum/core/text.hpp"
#include "fulcrum/planners/baselines/perdoc_cp.hpp"
#include "fulcrum/report/chrome_trace.hpp"
#include "fulcrum/report/simulate_report.hpp"
#include "option_aliases.hpp"
#include "outputs.hpp"
#include "verbosity.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>

namespace fulcrum::cli {
namespace {

struct SimulateArgs {
  studies::StudySpec spec;
  std::string planners = "distca,wlb,perdoc-cp,packed";
  std::string candidates;  // auto's
  int cp_alias = 0;        // the deprecated --cp: --cp-degree
  std::string modes = "pingpong";
  std::string baseline_mode = "single-stream";
  std::vector<std::string> sweep;
  int dp = 0;
  std::string json_path, csv_path, svg_path, trace_path;
};

// A progress bar of the runs (verbosity.hpp says where it goes).
void show_run_progress(int done, int total) {
  const int width = 30, filled = total > 0 ? width * done / total : width;
  show_progress(fmt::format("[{}{}] {}/{} runs", std::string(static_cast<std::size_t>(filled), '#'),
                            std::string(static_cast<std::size_t>(width - filled), ' '), done, total),
                done == total);
}

// "x.svg" -> "x-breakdown.svg": the second chart sits beside the first.
std::string sibling_path(const std::string& path, const std::string& suffix) {
  const auto dot = path.rfind('.');
  const auto slash = path.rfind('/');
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash)) return path + suffix;
  return path.substr(0, dot) + suffix + path.substr(dot);
}

// The cluster: model, hardware and parallel layout. Returns --pp's option, whose absence lets --search
// choose pp.
CLI::Option* add_cluster_options(CLI::App& cmd, SimulateArgs& a) {
  auto& c = a.spec.base;
  add_model_option(cmd, a.spec.model, "every layer's compute, traffic and memory");
  cmd.add_option(
         "--hardware", a.spec.hardware,
         fmt::format("{} | a JSON file (e.g. data/hardware/cpu-local.json)", fmt::join(hardware_preset_names(), " | ")))
      ->capture_default_str();
  cmd.add_option("--gpus", c.parallel.gpus, "GPUs in the job")->capture_default_str();
  cmd.add_option("--tp", c.parallel.tp, "tensor parallelism (inside a node)")->capture_default_str();
  cmd.add_option("--dp", a.dp, "TP groups per pipeline stage; 0: gpus / (tp x pp), else it must equal that");
  auto* pp_option =
      cmd.add_option("--pp", c.parallel.pp, "pipeline stages (with --search: pins pp)")->capture_default_str();
  cmd.add_option("--microbatches", c.parallel.microbatches, "per pipeline and iteration; 0: 1, or 2 x pp with PP");
  cmd.add_flag("--search", a.spec.search,
               "give each planner the best cp (and pp, unless --pp is given) it finds, global batch fixed");
  return pp_option;
}

// The data: what each iteration's batch is drawn from.
void add_workload_options(CLI::App& cmd, studies::StudySpec& spec) {
  auto& c = spec.base;
  cmd.add_option("--max-doc-len", c.max_doc_len, "longest document, tokens")->capture_default_str();
  cmd.add_option("--dataset", c.dataset, "pretrain | prolong | uniform:MIN:MAX | lognormal:MU:SIGMA | file:PATH")
      ->capture_default_str();
  cmd.add_option("--mask", c.mask, mask_syntax_list(" | "))->capture_default_str();
  cmd.add_option("--tokens-per-rank", c.tokens_per_rank, "tokens per TP group and micro-batch; 0: max-doc-len")
      ->capture_default_str();
}

// The planners compared and how each run goes: planners and their options, communication modes,
// iterations, the layer schedule, the reference planner, the sweep. (In one function because --help lists
// options in the order they are added.)
// An option whose text `set` parses (naming the option in its errors); `shown` is its default in --help.
void add_parsed_option(CLI::App& cmd, const std::string& name, const std::function<void(const std::string&)>& set,
                       const std::string& help, const std::string& type, const std::string& shown) {
  cmd.add_option_function<std::string>(name, set, help)->type_name(type)->default_str(shown);
}

void add_planner_options(CLI::App& cmd, SimulateArgs& a) {
  auto& c = a.spec.base;
  auto* planners = cmd.add_option("--planners", a.planners, "comma-separated planners, compared: " + planner_list())
                       ->capture_default_str();
  add_auto_options(cmd, a.candidates, nullptr);
  add_deprecated_alias(cmd, "--systems", planners, a.planners);
  cmd.add_option("--modes", a.modes, "DistCA's: comma-separated pingpong, single-stream, signal")
      ->capture_default_str();
  cmd.add_option("--baseline-mode", a.baseline_mode, "the baselines' communication mode")->capture_default_str();
  cmd.add_option("--iterations", c.iterations, "measured iterations per run (fresh data each)")->capture_default_str();
  cmd.add_option("--warmup", c.warmup_iterations,
                 "iterations before the measured ones that fill a deferring planner's queue (others skip them)")
      ->capture_default_str();
  cmd.add_option("--seed", c.seed, "seed of the length source")->capture_default_str();
  add_planner_flags(cmd, c.planner_options);
  add_boundary_split_option(cmd, c.boundary_split);
  add_parsed_option(
      cmd, "--layer-schedule", [&c](const std::string& text) { c.whole_layer = sim::parse_layer_schedule(text); },
      "whole (ping-pong layers overlap across their boundaries, as DistCA runs) | per-layer (one layer at a time, "
      "the model before issue 20)",
      "TEXT", "whole");
  add_parsed_option(
      cmd, "--recompute", [&c](const std::string& text) { c.memory.recompute = sim::parse_recompute(text); },
      "activation recomputation, for memory: none (every activation kept) | selective (core attention recomputed) "
      "| full (every layer recomputed from its input)",
      "TEXT", "none");
  add_parsed_option(
      cmd, "--zero1", [&c](const std::string& text) { c.memory.zero1 = sim::parse_zero1(text); },
      "1: optimizer states sharded over the data-parallel groups (ZeRO-1, Megatron's distributed optimizer); 0: "
      "whole on every GPU",
      "0|1", "1");
  // --cp-degree is the simulator's CP degree (TP groups per CP group) for the planners with CP groups; 0,
  // the default: perdoc-cp up to 8, wlb the least that keeps documents whole.
  // Range-checked as --cp-degree is, at parsing (a negative once ran as the default); CLI11's own conversion
  // names what is not a number.
  add_deprecated_alias(cmd, "--cp", cmd.get_option("--cp-degree"), a.cp_alias)
      ->check(CLI::Validator(
          [](std::string& text) -> std::string {
            try {
              cp_degree_option().check(std::stod(text));
            } catch (const Error& e) {
              return e.what();
            } catch (const std::exception&) {}
            return {};
          },
          std::string()));
  cmd.add_option("--reference", a.spec.reference, "speedups are relative to this planner (else the first)")
      ->capture_default_str();
  cmd.add_option("--sweep", a.sweep, "KEY=V1,V2,... (repeatable): run every combination")->take_all();
}

// The parsed flags into the study's spec, checked: dp against the layout, names, modes, sweep axes, and
// every output file writable before any run starts.
void finish_spec(const CLI::App& cmd, SimulateArgs& a, bool pp_given) {
  auto& spec = a.spec;
  spec.search_pp = !pp_given;
  const auto& p = spec.base.parallel;
  // In 64 bits: tp x pp may not fit an int (it is at most 2^62 here).
  const std::int64_t stage_gpus = std::int64_t{p.tp} * p.pp;
  if (a.dp != 0 && (p.tp < 1 || p.pp < 1 || p.gpus % stage_gpus != 0 || p.gpus / stage_gpus != a.dp)) {
    fail("dp = {}: must equal gpus / (tp x pp) = {} / ({} x {})", a.dp, p.gpus, p.tp, p.pp);
  }
  spec.planners = split_names(a.planners, "planners");
  warn_unread_planner_flags(cmd, spec.planners);
  spec.base.candidates = auto_candidates(a.planners, a.candidates);
  if (a.cp_alias > 0) spec.base.planner_options.set(cp_degree_option().name, a.cp_alias);
  spec.modes.clear();
  for (const auto& m : split_names(a.modes, "modes")) spec.modes.push_back(parse_comm_mode(m, "modes"));
  spec.baseline_mode = parse_comm_mode(a.baseline_mode, "baseline-mode");
  for (const auto& s : a.sweep) {
    spec.sweep.push_back(studies::parse_sweep_axis(s));
    const std::string& key = spec.sweep.back().key;
    warn_if_unread(key, "--sweep " + key, spec.planners);
  }
  for (const auto& [option, path] : {std::pair{"json", a.json_path}, std::pair{"csv", a.csv_path},
                                     std::pair{"svg", a.svg_path}, std::pair{"trace", a.trace_path}}) {
    if (!path.empty()) check_output_file(option, path);
  }
  if (!a.svg_path.empty()) check_output_file("svg", sibling_path(a.svg_path, "-breakdown"));
}

// The table and notes on stdout, then the files asked for.
void write_study(const studies::Study& study, const SimulateArgs& a) {
  fmt::print("{}", study_table(study));
  for (const auto& line : study_auto_lines(study)) fmt::print("{}\n", line);
  for (const auto& line : study_warnings(study)) warn(line);
  if (!a.json_path.empty()) write_output_json("json", a.json_path, study_json(study));
  if (!a.csv_path.empty()) write_output("csv", a.csv_path, study_csv(study));
  if (!a.svg_path.empty()) {
    write_output("svg", a.svg_path, bar_chart_svg(study_speedup_chart(study)));
    write_output("svg", sibling_path(a.svg_path, "-breakdown"), bar_chart_svg(study_breakdown_chart(study)));
  }
  if (!a.trace_path.empty()) {
    std::vector<std::string> names;
    const auto& first = study.rows.front().result;
    const int dp = first.config.parallel.dp();
    names.reserve(static_cast<std::size_t>(first.config.parallel.attention_ranks()));
    for (int r = 0; r < first.config.parallel.attention_ranks(); ++r) {
      names.push_back(fmt::format("stage {} group {}", r / dp, r % dp));
    }
    write_output("trace", a.trace_path, chrome_trace({first.trace}, names).dump() + "\n");
  }
}

}  // namespace

Action add_simulate_command(CLI::App& app) {
  auto* cmd =
      app.add_subcommand("simulate", "Simulate training iterations of DistCA and the baselines on a modelled cluster");
  auto a = std::make_shared<SimulateArgs>();
  a->spec.base.parallel.cp = 0;
  a->spec.reference = "wlb";
  auto* pp_option = add_cluster_options(*cmd, *a);
  add_workload_options(*cmd, a->spec);
  add_planner_options(*cmd, *a);
  add_output_option(*cmd, "json", a->json_path, "write the results as JSON");
  add_output_option(*cmd, "csv", a->csv_path, "write the results as CSV");
  add_output_option(*cmd, "svg", a->svg_path,
                    "write the speedup chart here and the time breakdown beside it (-breakdown)");
  add_output_option(*cmd, "trace", a->trace_path, "write the first run's first iteration as a Chrome trace");
  return [cmd, a, pp_option] {
    finish_spec(*cmd, *a, pp_option->count() != 0);
    write_study(studies::run_study(a->spec, show_run_progress), *a);
    return 0;
  };
}

}  // namespace fulcrum::cli

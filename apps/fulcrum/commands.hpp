// Each subcommand lives in its own file and registers itself on the app; main.cpp only dispatches.
#pragma once

#include "fulcrum/planners/planner.hpp"

#include <CLI/CLI.hpp>

#include <functional>

namespace fulcrum::cli {

/// A registered subcommand: what runs after parsing when it was chosen. Returns the exit code.
using Action = std::function<int()>;

Action add_plan_command(CLI::App& app);
Action add_bench_command(CLI::App& app);       // `bench kernels`
Action add_bench_comm_command(CLI::App& app);  // `bench comm` (after add_bench_command)
Action add_profile_command(CLI::App& app);
Action add_run_command(CLI::App& app);
Action add_demo_command(CLI::App& app);
Action add_simulate_command(CLI::App& app);
Action add_heads_command(CLI::App& app);  // FlexAttn's head solvers
Action add_prefill_command(CLI::App& app);
Action add_models_command(CLI::App& app);  // the model shapes --model accepts

/// --model, with the same help in every subcommand: a preset, a Hugging Face config.json or a Fulcrum model
/// file; `what` says what the command takes from it. The default is what `model` holds.
CLI::Option* add_model_option(CLI::App& cmd, std::string& model, std::string_view what);

/// "distca, dcp, ...": the registered planners, for help texts.
std::string planner_list();

/// One flag per option of every registered planner (--tolerance, --granularity, --cp-degree, --dcp-block,
/// ...), the same in every subcommand; values are range-checked as they are parsed.
void add_planner_flags(CLI::App& cmd, PlannerOptions& options);
/// One warning per planner flag given on `cmd` that none of `planners` reads (auto reads them all): what
/// the user gave is never dropped silently.
void warn_unread_planner_flags(const CLI::App& cmd, const std::vector<std::string>& planners);
/// The same warning for one planner option given as `given_as` (a flag, a sweep axis); none for options
/// that some planner of `planners` reads, or that are not planner options.
void warn_if_unread(std::string_view option, std::string_view given_as, const std::vector<std::string>& planners);
/// A range check on a numeric flag whose error names the flag ("--head-dim: 0: must be in [1, 512]") and
/// which leaves --help as it was (CLI::Range would rewrite the flag's type column there).
CLI::Validator in_range(double lo, double hi);
/// The kernels' head counts and head dimension (kernels/attention_task.cpp).
inline const CLI::Validator kHeadCount = in_range(1, 65536);
inline const CLI::Validator kHeadDim = in_range(1, 512);
/// Every numeric option of `app` and its subcommands rejects an empty value (CLI11 reads it as 0), and every
/// integer one a value outside its type's 64-bit range (a negative for an unsigned one) instead of CLI11's
/// clamping or wrapping. Call after adding them all.
void reject_bad_numbers(CLI::App& app);
/// When argv's first word is not an option and names no subcommand of `app`: one line saying so, the
/// nearest subcommand if it looks like a typo, and the list; else "" (CLI11's own message stands).
std::string unknown_subcommand_message(CLI::App& app, int argc, char** argv);
/// For CLI11's "arguments were not expected": the first --option of argv that the (sub)command it follows
/// does not have, with the nearest one it does have if that looks like a typo; else "".
std::string unknown_option_message(CLI::App& app, int argc, char** argv);
/// `fulcrum --version`: "fulcrum 0.1.0 (git REV, BUILD-TYPE build, COMPILER); kernels: ISA".
std::string version_text();
/// --devices-per-machine: the machine size real runs and plans assume (the simulator takes it from the
/// hardware model instead).
void add_topology_flags(CLI::App& cmd, PlannerOptions& options);
/// --boundary-split: how the packing lays a document that crosses ranks over them (workload/batch.hpp).
void add_boundary_split_option(CLI::App& cmd, BoundarySplit& split);
/// auto's options (sim/auto_choice.hpp): --candidates, and --hardware (what it simulates plans on) unless
/// `hardware` is null (simulate's --hardware is the cluster itself).
void add_auto_options(CLI::App& cmd, std::string& candidates, std::string* hardware);
/// The --candidates list, or bad input when it is given and `planners` does not name auto.
std::vector<std::string> auto_candidates(const std::string& planners, const std::string& candidates);

}  // namespace fulcrum::cli

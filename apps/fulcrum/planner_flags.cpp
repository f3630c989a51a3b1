// The planners' option flags, generated from their declarations (planners/registry): `plan`, `run` and
// `simulate` get the same --NAME, help, default and range for every option of every planner.
#include "commands.hpp"
#include "verbosity.hpp"

#include "fulcrum/core/error.hpp"
#include "fulcrum/core/text.hpp"
#include "fulcrum/cost/hardware_model.hpp"
#include "fulcrum/sim/auto_choice.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

namespace fulcrum::cli {

std::string planner_list() {
  std::string list = fmt::format("{}", fmt::join(planner_names(), ", "));
  for (const auto& meta : meta_planner_registry())
    list += fmt::format(", {} (a meta-planner: {})", meta.name, meta.summary);
  return list;
}

void add_planner_flags(CLI::App& cmd, PlannerOptions& options) {
  for (const OptionSpec& spec : planner_option_specs()) {
    const std::string name(spec.name);
    // The default shown is the command's own (e.g. `demo` sets DistCA's tolerance), not the planner's.
    cmd.add_option_function<double>(
           "--" + name, [&options, name](double value) { options.set(name, value); },
           fmt::format("{} (default {}; {})", spec.help, options.get(spec), spec.range_text()))
        ->type_name(spec.kind == OptionKind::kFlag ? "0|1"
                    : spec.whole()                 ? "INT"
                                                   : "FLOAT")
        ->group("Planner options");
  }
}

void warn_if_unread(std::string_view option, std::string_view given_as, const std::vector<std::string>& planners) {
  // A meta-planner plans with every candidate, so it reads every option.
  if (names_meta_planner(planners)) return;
  std::vector<std::string> readers;
  for (const auto& name : planner_names()) {
    const auto& declared = find_planner(name).options;
    if (std::any_of(declared.begin(), declared.end(), [&](const OptionSpec& o) { return o.name == option; })) {
      readers.push_back(name);
    }
  }
  const auto read = [&](const std::string& p) { return std::find(readers.begin(), readers.end(), p) != readers.end(); };
  if (!readers.empty() && std::none_of(planners.begin(), planners.end(), read)) {
    warn(fmt::format("{} is read only by {}, and this run plans {}: it has no effect", given_as,
                     fmt::join(readers, ", "), fmt::join(planners, ", ")));
  }
}

void warn_unread_planner_flags(const CLI::App& cmd, const std::vector<std::string>& planners) {
  for (const OptionSpec& spec : planner_option_specs()) {
    const CLI::Option* flag = cmd.get_option_no_throw("--" + std::string(spec.name));
    if (flag != nullptr && flag->count() > 0) warn_if_unread(spec.name, "--" + std::string(spec.name), planners);
  }
}

void add_boundary_split_option(CLI::App& cmd, BoundarySplit& split) {
  cmd.add_option_function<std::string>(
         "--boundary-split", [&split](const std::string& text) { split = parse_boundary_split(text); },
         "contiguous (one piece per rank) | head-tail (DistCA's packing: each rank holds a head and a tail "
         "piece of a document that crosses ranks, keeping its token count)")
      ->type_name("TEXT")
      ->default_str(to_string(split));
}

void add_auto_options(CLI::App& cmd, std::string& candidates, std::string* hardware) {
  cmd.add_option("--candidates", candidates,
                 fmt::format("comma-separated: {}", meta_planner_registry().front().candidates_help));
  if (hardware != nullptr) {
    cmd.add_option("--hardware", *hardware,
                   fmt::format("auto's hardware model, a rank one GPU of it: {} | a JSON file",
                               fmt::join(hardware_preset_names(), " | ")))
        ->capture_default_str();
  }
}

std::vector<std::string> auto_candidates(const std::string& planners, const std::string& candidates) {
  if (candidates.empty()) return {};
  std::vector<std::string> names = split_names(candidates, "candidates");
  sim::check_candidates_need_auto(split_names(planners, "planners"), names);
  return names;
}

void add_topology_flags(CLI::App& cmd, PlannerOptions& options) {
  cmd.add_option("--devices-per-machine", options.devices_per_machine,
                 "ranks per machine (DCP partitions machines, then their devices)")
      ->capture_default_str();
}

}  // namespace fulcrum::cli

// The DCP planner's options, shared by `fulcrum plan` and `fulcrum run`.
#include "commands.hpp"

namespace fulcrum::cli {

void add_dcp_options(CLI::App& cmd, PlannerOptions& options) {
  cmd.add_option("--dcp-block", options.dcp_block, "DCP: tokens per data block")->capture_default_str();
  cmd.add_option("--dcp-epsilon-machines", options.dcp_epsilon_machines, "DCP: balance slack across machines")
      ->capture_default_str();
  cmd.add_option("--dcp-epsilon-devices", options.dcp_epsilon_devices, "DCP: balance slack across a machine's devices")
      ->capture_default_str();
  cmd.add_option("--dcp-divisions", options.dcp_divisions, "DCP: ordered divisions whose traffic overlaps compute")
      ->capture_default_str();
  cmd.add_option("--devices-per-machine", options.devices_per_machine, "DCP: ranks per machine")->capture_default_str();
}

}  // namespace fulcrum::cli

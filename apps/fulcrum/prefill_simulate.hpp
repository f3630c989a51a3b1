// `fulcrum prefill --simulate PRESET`: the same prefill (model, head pattern report, tokens, ranks, solvers,
// WPR / CPIP) on a modelled GPU node instead of real ranks (sim/prefill.hpp), no weights file, no MPI.
// The flag helpers the real and the simulated prefill share live here too.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace fulcrum::cli {

/// "0", "1" or "0,1": the values of an on/off option to run side by side (bad input naming `field`).
std::vector<bool> switches(const std::string& text, const char* field);
/// The comma list of --solver, each a registered head solver (bad input naming `solver`), once each.
std::vector<std::string> solver_names(const std::string& text);

struct PrefillSimArgs {
  std::string hardware;  // a preset or a hardware JSON file (load_hardware)
  int ranks = 0;         // simulated devices; 0: the preset's devices per node
  std::string model;
  std::string patterns;
  std::string profile;  // empty: analytic head costs at the preset's rates
  std::string solver;   // comma list; empty: lpt-ls
  std::string wpr = "1", cpip = "1";
  long tokens = 0;
  std::uint64_t seed = 1;
  std::string json;
};

/// Prints the per-layer and summary tables (and writes --json); returns the exit code.
int run_prefill_simulation(const PrefillSimArgs& args);

}  // namespace fulcrum::cli

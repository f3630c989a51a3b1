// What `fulcrum prefill` prints and writes: per configuration (solver, WPR, CPIP) a table per rank and layer,
// per layer the solver's predicted T_layer beside the measured times and the attention spread, throughput,
// and a side-by-side comparison; the same as JSON.
#pragma once

#include "fulcrum/prefill/head_plan.hpp"
#include "fulcrum/prefill/prefill_report.hpp"

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

namespace fulcrum::cli {

struct PrefillConfigResult {
  heads::ModelPlan plan;  // the solver, its assignment and predicted times
  bool wpr = true;
  bool cpip = true;
  int repeats = 1;
  prefill::PrefillReport report;    // medians over the repeats
  std::optional<double> max_error;  // --check: against the fp64 reference
};

struct PrefillRunInfo {
  std::string model, patterns, costs, weights;
  long tokens = 0;
  int ranks = 0;
  double tolerance = 0;
};

std::string prefill_text(const PrefillRunInfo& info, const std::vector<PrefillConfigResult>& results);
nlohmann::json prefill_json(const PrefillRunInfo& info, const std::vector<PrefillConfigResult>& results);

}  // namespace fulcrum::cli

#include "fulcrum/planners/planner.hpp"

#include "fulcrum/core/error.hpp"
#include "fulcrum/planners/baselines/packed.hpp"
#include "fulcrum/planners/baselines/perdoc_cp.hpp"
#include "fulcrum/planners/baselines/static_cp.hpp"
#include "fulcrum/planners/baselines/wlb.hpp"
#include "fulcrum/planners/dcp/dcp_planner.hpp"
#include "fulcrum/planners/distca/distca_planner.hpp"

#include <fmt/ranges.h>

#include <cmath>
#include <utility>

namespace fulcrum {

void PlannerOptions::validate(Tokens tokens_per_rank) const {
  model.validate();
  if (!(tolerance >= 0.0 && tolerance <= 10.0)) fail("tolerance = {}: must be in [0, 10]", tolerance);
  if (granularity < 1 || granularity > tokens_per_rank) {
    fail("granularity = {}: must be in [1, tokens-per-rank = {}]", granularity, tokens_per_rank);
  }
  if (cp_degree < 1) fail("cp-degree = {}: must be >= 1", cp_degree);
  if (!(wlb_token_cap >= 1.0 && std::isfinite(wlb_token_cap))) {
    fail("wlb-token-cap = {}: must be >= 1 (a multiple of tokens-per-rank)", wlb_token_cap);
  }
  if (dcp_block < 1) fail("dcp-block = {}: must be >= 1 token", dcp_block);
  for (const auto& [name, eps] : {std::pair{"dcp-epsilon-machines", dcp_epsilon_machines},
                                  std::pair{"dcp-epsilon-devices", dcp_epsilon_devices}}) {
    if (!(eps >= 0.0 && eps <= 10.0)) fail("{} = {}: must be in [0, 10]", name, eps);
  }
  if (dcp_divisions < 1 || dcp_divisions > 64) fail("dcp-divisions = {}: must be in [1, 64]", dcp_divisions);
  if (devices_per_machine < 1) fail("devices-per-machine = {}: must be >= 1", devices_per_machine);
}

std::vector<std::string> planner_names() { return {"distca", "dcp", "packed", "perdoc-cp", "wlb", "ring", "zigzag"}; }

std::unique_ptr<Planner> make_planner(std::string_view name, const PlannerOptions& options) {
  if (name == "distca") return std::make_unique<DistcaPlanner>(options);
  if (name == "dcp") return std::make_unique<DcpPlanner>(options);
  if (name == "packed") return std::make_unique<PackedPlanner>(options);
  if (name == "perdoc-cp") return std::make_unique<PerDocCpPlanner>(options);
  if (name == "wlb") return std::make_unique<WlbPlanner>(options);
  if (name == "ring") return std::make_unique<StaticCpPlanner>(options, CpLayout::kRing);
  if (name == "zigzag") return std::make_unique<StaticCpPlanner>(options, CpLayout::kZigzag);
  fail("planner = '{}': unknown; choose from {}", name, fmt::join(planner_names(), ", "));
}

Range visible_key_hull(const Document& doc, std::span<const Range> queries) {
  Range hull{doc.length, 0};
  for (const auto& q : queries) {
    for (const auto& k : doc.mask.keys_needed(q, {0, doc.length}, doc.length)) {
      hull.begin = std::min(hull.begin, k.begin);
      hull.end = std::max(hull.end, k.end);
    }
  }
  return hull;
}

}  // namespace fulcrum

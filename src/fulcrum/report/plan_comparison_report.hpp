// What `fulcrum plan` prints and writes: a planner comparison as a table and as JSON.
#pragma once

#include "fulcrum/studies/plan_comparison.hpp"

#include <nlohmann/json.hpp>

#include <string>

namespace fulcrum {

std::string plan_comparison_table(const studies::PlanComparison& comparison);
nlohmann::json plan_comparison_json(const studies::PlanComparison& comparison);

}  // namespace fulcrum

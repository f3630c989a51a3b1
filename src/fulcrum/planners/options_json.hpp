// Planner options as JSON, generated from their declarations: the values a report writes, and the JSON
// Schema of those values (docs/schemas/plan.schema.json holds it; python/tests/test_planners.py checks that
// the committed schema is the generated one).
#pragma once

#include "fulcrum/planners/options.hpp"

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>

namespace fulcrum {

/// The JSON key of an option: its name with `_` for `-` ("dcp_block").
std::string option_json_key(std::string_view option_name);

/// Every planner option by its JSON key; whole-number options and flags as JSON integers.
nlohmann::json planner_options_json(const PlannerOptions& options);

/// The JSON Schema of planner_options_json's object: per option its type, range, default and help.
nlohmann::json planner_options_schema();

}  // namespace fulcrum

#include "fulcrum/planners/options_json.hpp"

#include "fulcrum/planners/planner.hpp"

#include <algorithm>
#include <cstdint>

namespace fulcrum {

std::string option_json_key(std::string_view option_name) {
  std::string key(option_name);
  std::replace(key.begin(), key.end(), '-', '_');
  return key;
}

nlohmann::json planner_options_json(const PlannerOptions& options) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& spec : planner_option_specs()) {
    const double value = options.get(spec);
    // OptionSpec::check keeps an integer option or a flag whole and within its (small) declared range.
    if (spec.whole()) {
      out[option_json_key(spec.name)] = static_cast<std::int64_t>(value);
    } else {
      out[option_json_key(spec.name)] = value;
    }
  }
  return out;
}

namespace {

// A whole bound as a JSON integer, so that the schema reads as the option's type.
nlohmann::json bound(const OptionSpec& spec, double value) {
  return spec.whole() ? nlohmann::json(static_cast<std::int64_t>(value)) : nlohmann::json(value);
}

}  // namespace

nlohmann::json planner_options_schema() {
  nlohmann::json properties = nlohmann::json::object();
  nlohmann::json required = nlohmann::json::array();
  for (const auto& spec : planner_option_specs()) {
    const std::string key = option_json_key(spec.name);
    properties[key] = {{"type", spec.whole() ? "integer" : "number"},
                       {"minimum", bound(spec, spec.lowest())},
                       {"maximum", bound(spec, spec.highest())},
                       {"default", bound(spec, spec.default_value)},
                       {"description", std::string(spec.help)}};
    required.push_back(key);
  }
  return {{"type", "object"},
          {"description",
           "every planner option by name (dashes as underscores); whole-number options and flags (0 or 1) as "
           "integers. Generated from the options' declarations (fulcrum.planner_options_schema())"},
          {"properties", properties},
          {"required", required},
          {"additionalProperties", false}};
}

}  // namespace fulcrum

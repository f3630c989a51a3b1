#include "fulcrum/report/report_json.hpp"

#include "fulcrum/planners/planner.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>

namespace fulcrum {

namespace {

std::string json_key(std::string_view option_name) {
  std::string key(option_name);
  std::replace(key.begin(), key.end(), '-', '_');
  return key;
}

}  // namespace

std::int64_t whole(double count) { return std::llround(count); }

nlohmann::json report_object() { return {{"schema_version", kReportSchemaVersion}}; }

nlohmann::json planner_options_json(const PlannerOptions& options) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& spec : planner_option_specs()) {
    const double value = options.get(spec);
    // OptionSpec::check keeps an integer option whole and within its (small) declared range.
    if (spec.integer) {
      out[json_key(spec.name)] = static_cast<std::int64_t>(value);
    } else {
      out[json_key(spec.name)] = value;
    }
  }
  return out;
}

}  // namespace fulcrum

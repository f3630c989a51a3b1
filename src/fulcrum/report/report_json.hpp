// What every JSON report shares: its schema version, and planner options written the way JSON readers
// expect them (snake_case keys, whole-number options as integers).
#pragma once

#include "fulcrum/planners/options_json.hpp"  // planner_options_json, which reports write

#include <nlohmann/json.hpp>

#include <cstdint>

namespace fulcrum {

/// The version of every report `--json` writes (plan, run, simulate, models; docs/schemas/ describes them).
/// It changes when a key is renamed, removed or changes meaning, not when one is added.
inline constexpr int kReportSchemaVersion = 1;

/// `{"schema_version": kReportSchemaVersion}`, the object a report starts from.
nlohmann::json report_object();

/// A count the engine sums in a double (bytes moved: exact below 2^53) as the JSON integer it is.
std::int64_t whole(double count);

}  // namespace fulcrum

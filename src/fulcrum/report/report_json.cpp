#include "fulcrum/report/report_json.hpp"

#include <cmath>
#include <cstdint>

namespace fulcrum {

std::int64_t whole(double count) { return std::llround(count); }

nlohmann::json report_object() { return {{"schema_version", kReportSchemaVersion}}; }

}  // namespace fulcrum

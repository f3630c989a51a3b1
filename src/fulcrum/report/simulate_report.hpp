// A simulator study as a table (stdout), CSV, JSON and two SVG charts: the speedup of every system
// over the reference at each sweep point, and where an average GPU's iteration goes.
#pragma once

#include "fulcrum/report/svg_chart.hpp"
#include "fulcrum/studies/simulate_study.hpp"

#include <nlohmann/json.hpp>

#include <string>

namespace fulcrum {

std::string study_table(const studies::Study& study);
std::string study_csv(const studies::Study& study);
nlohmann::json study_json(const studies::Study& study);
/// Categories: the sweep points; one series per system (and DistCA mode).
BarChart study_speedup_chart(const studies::Study& study);
/// Categories: each row (system at a point); one series per part of the iteration time.
BarChart study_breakdown_chart(const studies::Study& study);

}  // namespace fulcrum

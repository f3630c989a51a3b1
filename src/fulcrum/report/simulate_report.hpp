// A simulator study as a table (stdout), CSV, JSON and two SVG charts: the speedup of every planner
// over the reference at each sweep point, and where an average GPU's iteration goes.
#pragma once

#include "fulcrum/report/svg_chart.hpp"
#include "fulcrum/studies/simulate_study.hpp"

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace fulcrum {

std::string study_table(const studies::Study& study);
/// A deferring planner's (WLB-LLM's) rate is uncertain when its queue took in or gave out much of the window's
/// work, and so is every speedup over it when it is the reference: a line for each row whose computed FLOPs
/// differ from those drawn by more than kCarriedWorkWarningShare.
inline constexpr double kCarriedWorkWarningShare = 0.1;
/// Planning that a step ahead would not hide (TrainingResult::unhidden_planning_s) over
/// kUnhiddenPlanningWarningShare of the iteration gets a line too.
inline constexpr double kUnhiddenPlanningWarningShare = 0.01;
std::vector<std::string> study_warnings(const studies::Study& study);
/// A line per auto row: how often each candidate was chosen and came second, how much slower the runner-up
/// was (median), and what choosing cost (planning every candidate, against the chosen plans alone).
std::vector<std::string> study_auto_lines(const studies::Study& study);
std::string study_csv(const studies::Study& study);
nlohmann::json study_json(const studies::Study& study);
/// A group of bars per sweep point and a bar per planner (and DistCA mode). With several sweep keys and more
/// than a few points, one panel per value of the first key, the groups labelled by the others.
/// The speedup: one value per bar.
BarChart study_speedup_chart(const studies::Study& study);
/// The time breakdown: each bar stacks the parts of an average GPU's iteration.
BarChart study_breakdown_chart(const studies::Study& study);

}  // namespace fulcrum

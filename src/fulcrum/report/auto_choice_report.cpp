#include "fulcrum/report/auto_choice_report.hpp"

#include "fulcrum/core/statistics.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

namespace fulcrum {

std::vector<std::string> auto_choice_lines(std::string_view who, const sim::AutoChoice& choice) {
  const auto counts = [&](const std::vector<std::string>& picks) {
    std::vector<std::string> parts;
    for (const auto& name : choice.candidates) {
      const auto n = std::count(picks.begin(), picks.end(), name);
      if (n > 0) parts.push_back(fmt::format("{} {}/{}", name, n, picks.size()));
    }
    return parts.empty() ? std::string("none") : fmt::format("{}", fmt::join(parts, ", "));
  };
  std::vector<double> ratios;
  for (double r : choice.runner_up_ratio) {
    if (r > 0) ratios.push_back(r);
  }
  std::vector<std::string> planning;
  planning.reserve(choice.candidates.size());
  for (std::size_t i = 0; i < choice.candidates.size(); ++i) {
    planning.push_back(fmt::format("{} {:.3g}", choice.candidates[i], choice.planning_s[i]));
  }
  std::vector<std::string> lines = {fmt::format(
      "{}: chose {}; runner-up {}{}; planning {:.3g} s for every candidate ({}) against {:.3g} s for the chosen "
      "plans, simulating them {:.3g} s",
      who, counts(choice.chosen), counts(choice.runner_up),
      ratios.empty() ? "" : fmt::format(", median {:.3f}x the chosen time", median(ratios)), choice.total_planning_s(),
      fmt::join(planning, ", "), choice.chosen_planning_s, choice.simulating_s)};
  for (const auto& refusal : choice.refused) lines.push_back(fmt::format("  sat out a batch: {}", refusal));
  return lines;
}

}  // namespace fulcrum

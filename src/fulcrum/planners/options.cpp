#include "fulcrum/planners/options.hpp"

#include "fulcrum/core/error.hpp"
#include "fulcrum/planners/planner.hpp"

#include <cmath>

namespace fulcrum {

void OptionSpec::check(double value) const {
  const bool whole = !integer || std::floor(value) == value;
  if (!(value >= min && value <= max) || !whole) fail("{} = {}: must be {}", name, value, range_text());
}

std::string OptionSpec::range_text() const {
  return fmt::format("{}in [{}, {}]{}", integer ? "a whole number " : "", min, max,
                     at_most_tokens_per_rank ? ", at most tokens-per-rank" : "");
}

std::string OptionSpec::default_text() const { return fmt::format("{}", default_value); }

PlannerOptions& PlannerOptions::set(std::string_view name, double value) {
  find_planner_option(name).check(value);
  values_.insert_or_assign(std::string(name), value);
  return *this;
}

double PlannerOptions::get(const OptionSpec& spec) const {
  const auto it = values_.find(spec.name);
  return it == values_.end() ? spec.default_value : it->second;
}

int PlannerOptions::get_int(const OptionSpec& spec) const {
  FULCRUM_CHECK(spec.integer && spec.max <= 2147483647.0, "option {} is not an int", spec.name);
  return static_cast<int>(get(spec));
}

Tokens PlannerOptions::get_tokens(const OptionSpec& spec) const {
  FULCRUM_CHECK(spec.integer, "option {} is not a whole number", spec.name);
  return static_cast<Tokens>(get(spec));
}

void PlannerOptions::validate() const {
  model.validate();
  if (devices_per_machine < 1) fail("devices-per-machine = {}: must be >= 1", devices_per_machine);
}

}  // namespace fulcrum

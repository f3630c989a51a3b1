#include "fulcrum/planners/options.hpp"

#include "fulcrum/core/error.hpp"
#include "fulcrum/planners/planner.hpp"

#include <cmath>

namespace fulcrum {

void OptionSpec::check(double value) const {
  const bool in_range = value >= lowest() && value <= highest();
  const bool is_whole = !whole() || std::floor(value) == value;
  if (!in_range || !is_whole) fail("{} = {}: must be {}", name, value, range_text());
}

std::string OptionSpec::range_text() const {
  if (kind == OptionKind::kFlag) return "0 (off) or 1 (on)";
  return fmt::format("{}in [{}, {}]{}", whole() ? "a whole number " : "", min, max,
                     at_most_tokens_per_rank ? ", at most tokens-per-rank" : "");
}

std::string OptionSpec::default_text() const { return fmt::format("{}", default_value); }

PlannerOptions& PlannerOptions::set(std::string_view name, double value) {
  find_planner_option(name).check(value);
  values_.insert_or_assign(std::string(name), value);
  return *this;
}

double PlannerOptions::get(const OptionSpec& spec) const {
  if (reads_) {
    const std::lock_guard lock(reads_->mutex);
    reads_->names.emplace(spec.name);
  }
  const auto it = values_.find(spec.name);
  return it == values_.end() ? spec.default_value : it->second;
}

int PlannerOptions::get_int(const OptionSpec& spec) const {
  FULCRUM_CHECK(spec.kind == OptionKind::kInteger && spec.max <= 2147483647.0, "option {} is not an int", spec.name);
  return static_cast<int>(get(spec));
}

bool PlannerOptions::get_flag(const OptionSpec& spec) const {
  FULCRUM_CHECK(spec.kind == OptionKind::kFlag, "option {} is not a flag", spec.name);
  return get(spec) == 1;
}

Tokens PlannerOptions::get_tokens(const OptionSpec& spec) const {
  FULCRUM_CHECK(spec.kind == OptionKind::kInteger, "option {} is not a whole number", spec.name);
  return static_cast<Tokens>(get(spec));
}

void PlannerOptions::record_reads() { reads_ = std::make_shared<ReadLog>(); }

std::set<std::string> PlannerOptions::options_read() const {
  if (!reads_) return {};
  const std::lock_guard lock(reads_->mutex);
  return reads_->names;
}

void PlannerOptions::validate() const {
  model.validate();
  if (devices_per_machine < 1) fail("devices-per-machine = {}: must be >= 1", devices_per_machine);
}

}  // namespace fulcrum

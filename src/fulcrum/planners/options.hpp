// Planner options, declared once. Each planner declares its options (flag name, help, default, range)
// beside its code and registers them with itself (registry.hpp); the CLI's flags of `plan`, `run` and
// `simulate`, the simulator's TrainingConfig, sweeps and Python's PlannerOptions are all built from those
// declarations, so every option is set the same way everywhere and its range is checked in one place.
#pragma once

#include "fulcrum/core/interval.hpp"
#include "fulcrum/workload/model_shape.hpp"

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>

namespace fulcrum {

/// One planner option. Values are doubles; `integer` options must hold whole numbers.
struct OptionSpec {
  std::string_view name;  // the flag without dashes: "tolerance", "dcp-block"
  std::string_view help;
  double default_value = 0;
  double min = 0, max = 0;  // inclusive
  bool integer = false;
  /// Also at most a rank's tokens (a size that cuts a rank's rows): checked against each batch by
  /// Planner::plan, and clamped to a rank's tokens by the simulator, whose layout search varies them.
  bool at_most_tokens_per_rank = false;

  /// Throws a bad-input Error "NAME = VALUE: must be ..." when `value` is out of range or not whole.
  void check(double value) const;
  /// "in [0, 10]", "a whole number in [1, 64]", and ", at most tokens-per-rank" where that applies.
  std::string range_text() const;
  /// The default as a user writes it ("1024", "0.1").
  std::string default_text() const;
};

/// What a planner is told: the model, the machine's topology, a seed, and values for planner options
/// by name (an option not set takes its declared default).
class PlannerOptions {
 public:
  ModelShape model;
  /// Ranks per machine. It comes from the topology (a HardwareModel's node size over tp in the
  /// simulator, `--devices-per-machine` for real runs), never from a planner's own default.
  int devices_per_machine = 8;
  std::uint64_t seed = 0;  // for planners that draw random numbers (DCP's partitioner)

  /// Sets a registered planner option; errors name the option and its allowed range.
  PlannerOptions& set(std::string_view name, double value);
  /// The value of `spec`, its default when unset.
  double get(const OptionSpec& spec) const;
  int get_int(const OptionSpec& spec) const;
  Tokens get_tokens(const OptionSpec& spec) const;
  /// The options set explicitly, by name.
  const std::map<std::string, double, std::less<>>& values() const { return values_; }
  /// Throws a bad-input Error naming the field when the model or the topology is invalid.
  void validate() const;

 private:
  std::map<std::string, double, std::less<>> values_;
};

}  // namespace fulcrum

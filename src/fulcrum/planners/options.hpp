// Planner options, declared once. Each planner declares its options (name, kind, help, default, range)
// beside its code and registers them with itself (registry.cpp); the CLI's flags of `plan`, `run` and
// `simulate` (their --help), the simulator's TrainingConfig, sweeps, the options' JSON Schema
// (planner_options_schema) and Python's PlannerOptions keyword arguments are all generated from those
// declarations, so every option is set the same way everywhere and its range is checked in one place.
#pragma once

#include "fulcrum/core/interval.hpp"
#include "fulcrum/workload/model_shape.hpp"

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>

namespace fulcrum {

/// What values an option takes. A flag is on (1) or off (0); on the command line and in sweeps it is
/// written 0 or 1 like any value, and read back with PlannerOptions::get_flag.
enum class OptionKind : std::uint8_t { kReal, kInteger, kFlag };

/// One planner option, declared with designated initializers (`{.name = ..., .kind = ..., ...}`).
struct OptionSpec {
  std::string_view name;  // the flag without dashes: "tolerance", "dcp-block"
  std::string_view help;
  OptionKind kind = OptionKind::kReal;
  double default_value = 0;
  double min = 0, max = 0;  // as declared; read the range through lowest() and highest()
  /// Also at most a rank's tokens (a size that cuts a rank's rows): checked against each batch by
  /// Planner::plan, and clamped to a rank's tokens by the simulator, whose layout search varies them.
  bool at_most_tokens_per_rank = false;

  /// Whether its values are whole numbers (integers and flags).
  bool whole() const { return kind != OptionKind::kReal; }
  /// The inclusive range every reader uses (check, --help, the schema, Python): a flag's is [0, 1].
  double lowest() const { return kind == OptionKind::kFlag ? 0 : min; }
  double highest() const { return kind == OptionKind::kFlag ? 1 : max; }
  /// Throws a bad-input Error "NAME = VALUE: must be ..." when `value` is out of range or not whole.
  void check(double value) const;
  /// "in [0, 10]", "a whole number in [1, 64]", "0 (off) or 1 (on)", and ", at most tokens-per-rank" where
  /// that applies.
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
  bool get_flag(const OptionSpec& spec) const;
  Tokens get_tokens(const OptionSpec& spec) const;
  /// The options set explicitly, by name.
  const std::map<std::string, double, std::less<>>& values() const { return values_; }
  /// Throws a bad-input Error naming the field when the model or the topology is invalid.
  void validate() const;

  /// From now on this object and its copies (a planner keeps one) note every option read through get*, so
  /// that a test can find an option a planner declares and never reads, or reads without declaring it.
  void record_reads();
  /// The names read since record_reads() (empty without it).
  std::set<std::string> options_read() const;

 private:
  struct ReadLog {
    std::mutex mutex;  // planners run on several threads (the simulator's, Python's with the GIL released)
    std::set<std::string> names;
  };
  std::map<std::string, double, std::less<>> values_;
  std::shared_ptr<ReadLog> reads_;  // null unless record_reads(): reading costs nothing then
};

}  // namespace fulcrum

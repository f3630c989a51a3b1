// The one way Fulcrum reads JSON input (hardware models, profile tables, plans, length files): a parsed
// document that knows its file, and a cursor over it that knows the path of the value it points at, so
// every error names both, e.g.
//   "cpu.json: hardware.intra_node.latency_s = -1: must be >= 0"
//   "plan.json: not JSON: parse error at line 3, column 5: ..."
// Every error is a bad-input fulcrum::Error (exit 2). Integers are checked as integers (nlohmann would
// truncate 4.5 to 4 and wrap 1e10 silently), numbers as finite.
#pragma once

#include "fulcrum/core/error.hpp"

#include <nlohmann/json_fwd.hpp>  // the full header (seconds per file) only where JSON is built or read

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace fulcrum {

/// A value inside a JsonDocument (which must outlive it), with its source and path for errors.
class JsonValue {
 public:
  /// `source` names where the JSON came from (a file path; empty for JSON handed over in memory), `path`
  /// the value ("hardware", "plan.programs[2]").
  JsonValue(const nlohmann::json& value, std::string source, std::string path);

  const nlohmann::json& json() const { return *value_; }
  const std::string& path() const { return path_; }
  const std::string& source() const { return source_; }

  // Objects. `at` requires the member; errors name the object's path and the key.
  bool has(std::string_view key) const;
  JsonValue at(std::string_view key) const;
  std::optional<JsonValue> find(std::string_view key) const;
  /// Rejects members not in `allowed`, so a misspelt field is reported instead of silently defaulted.
  void only_keys(std::initializer_list<std::string_view> allowed) const;

  // Arrays: the elements, with paths "path[i]". `shape` says what is expected, e.g. "[begin, end]".
  std::vector<JsonValue> elements(std::size_t min_size = 0, std::size_t max_size = kAnySize,
                                  std::string_view shape = "an array") const;

  // Scalars.
  std::string string() const;
  bool boolean() const;
  /// A finite number in [lo, hi].
  double number(double lo = -std::numeric_limits<double>::max(), double hi = std::numeric_limits<double>::max()) const;
  /// A finite number > 0.
  double positive() const;
  /// An integer (not 4.5, not 1e10 for an int) in [lo, hi].
  template <class T>
  T integer(T lo = std::numeric_limits<T>::min(), T hi = std::numeric_limits<T>::max()) const {
    constexpr auto kMin = static_cast<std::int64_t>(std::numeric_limits<T>::min());
    constexpr auto kMax = static_cast<std::int64_t>(std::numeric_limits<T>::max());
    const auto wide = checked_integer(static_cast<std::int64_t>(lo), static_cast<std::int64_t>(hi), kMin, kMax);
    return static_cast<T>(wide);
  }
  /// A string turned into a value by `parse` (an enum, a mask); parse's own error is kept, after the path.
  template <class Parse>
  auto parsed(Parse parse) const {
    const std::string text = string();
    try {
      return parse(text);
    } catch (const Error& e) {
      fail("{}{} = '{}': {}", prefix(), path_, text, e.what());
    }
  }

  /// "source: path = value: must be <requirement>", as a bad-input Error.
  [[noreturn]] void fail_must(std::string_view requirement) const;
  /// "source: path = value: <why>", for requirements that do not read "must be" (a version).
  [[noreturn]] void fail_because(std::string_view why) const;
  /// "source: path: <message>", for checks the reader cannot express (a table's own validation).
  [[noreturn]] void fail_here(std::string_view message) const;

  /// The value as an error shows it: its JSON text, cut short so that a misplaced object stays one line.
  std::string shown() const;

  static constexpr std::size_t kAnySize = std::numeric_limits<std::size_t>::max();

 private:
  std::string prefix() const { return source_.empty() ? std::string() : source_ + ": "; }
  // [lo, hi] within [type_min, type_max]: the message leaves out the bounds that are the type's own.
  std::int64_t checked_integer(std::int64_t lo, std::int64_t hi, std::int64_t type_min, std::int64_t type_max) const;

  const nlohmann::json* value_;
  std::string source_;
  std::string path_;
};

/// A parsed JSON text that owns its tree; root() is the cursor readers start from.
class JsonDocument {
 public:
  /// Reads and parses a file. Errors: "<path>: cannot be read", "<path>: not JSON: <where and why>".
  static JsonDocument read_file(const std::string& path, std::string root_name);
  /// Parses text from `source` (a name for errors; may be empty).
  static JsonDocument parse(std::string_view text, std::string source, std::string root_name);
  /// Wraps JSON already parsed (e.g. handed over from Python); errors then name only the path.
  JsonDocument(nlohmann::json json, std::string source, std::string root_name);

  JsonValue root() const { return {*json_, source_, root_name_}; }

 private:
  std::shared_ptr<const nlohmann::json> json_;  // shared: a JsonDocument may be copied or moved freely
  std::string source_;
  std::string root_name_;
};

}  // namespace fulcrum

#include "fulcrum/core/json_reader.hpp"

#include "fulcrum/core/input_file.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>

namespace fulcrum {

JsonValue::JsonValue(const nlohmann::json& value, std::string source, std::string path)
    : value_(&value), source_(std::move(source)), path_(std::move(path)) {}

std::string JsonValue::shown() const {
  std::string text = value_->dump();
  if (text.size() > 60) text = text.substr(0, 57) + "...";
  return text;
}

void JsonValue::fail_must(std::string_view requirement) const {
  fail("{}{} = {}: must be {}", prefix(), path_, shown(), requirement);
}

void JsonValue::fail_because(std::string_view why) const { fail("{}{} = {}: {}", prefix(), path_, shown(), why); }

void JsonValue::fail_here(std::string_view message) const { fail("{}{}: {}", prefix(), path_, message); }

bool JsonValue::has(std::string_view key) const { return value_->is_object() && value_->contains(key); }

JsonValue JsonValue::at(std::string_view key) const {
  if (!value_->is_object()) fail_must("an object");
  const auto it = value_->find(key);
  if (it == value_->end()) fail("{}{}.{}: missing", prefix(), path_, key);
  return {*it, source_, fmt::format("{}.{}", path_, key)};
}

std::optional<JsonValue> JsonValue::find(std::string_view key) const {
  if (!value_->is_object()) fail_must("an object");
  const auto it = value_->find(key);
  if (it == value_->end()) return std::nullopt;
  return JsonValue{*it, source_, fmt::format("{}.{}", path_, key)};
}

void JsonValue::only_keys(std::initializer_list<std::string_view> allowed) const {
  if (!value_->is_object()) fail_must("an object");
  for (const auto& item : value_->items()) {
    bool known = false;
    for (auto name : allowed) known = known || item.key() == name;
    if (!known) fail("{}{}.{}: unknown field; expected {}", prefix(), path_, item.key(), fmt::join(allowed, ", "));
  }
}

std::vector<JsonValue> JsonValue::elements(std::size_t min_size, std::size_t max_size, std::string_view shape) const {
  if (!value_->is_array() || value_->size() < min_size || value_->size() > max_size) fail_must(shape);
  std::vector<JsonValue> out;
  out.reserve(value_->size());
  for (std::size_t i = 0; i < value_->size(); ++i)
    out.emplace_back((*value_)[i], source_, fmt::format("{}[{}]", path_, i));
  return out;
}

std::string JsonValue::string() const {
  if (!value_->is_string()) fail_must("a string");
  return value_->get<std::string>();
}

bool JsonValue::boolean() const {
  if (!value_->is_boolean()) fail_must("true or false");
  return value_->get<bool>();
}

double JsonValue::number(double lo, double hi) const {
  if (!value_->is_number()) fail_must("a number");
  const double x = value_->get<double>();
  if (!std::isfinite(x)) fail_must("finite");
  if (x < lo || x > hi) {
    if (hi == std::numeric_limits<double>::max()) fail_must(fmt::format(">= {}", lo));
    if (lo == -std::numeric_limits<double>::max()) fail_must(fmt::format("<= {}", hi));
    fail_must(fmt::format("in [{}, {}]", lo, hi));
  }
  return x;
}

double JsonValue::positive() const {
  if (!value_->is_number()) fail_must("a number");
  const double x = value_->get<double>();
  if (!(x > 0) || !std::isfinite(x)) fail_must("finite and > 0");
  return x;
}

std::int64_t JsonValue::checked_integer(std::int64_t lo, std::int64_t hi, std::int64_t type_min,
                                        std::int64_t type_max) const {
  if (!value_->is_number_integer()) fail_must("an integer");
  const bool too_large =
      value_->is_number_unsigned() &&
      value_->get<std::uint64_t>() > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
  const std::int64_t x = too_large ? std::numeric_limits<std::int64_t>::max() : value_->get<std::int64_t>();
  if (!too_large && x >= lo && x <= hi) return x;
  // One-sided where the value broke that side only: 2^40 layers must be <= INT_MAX, not ">= 1".
  if (hi == type_max && lo != type_min && !too_large && x < lo) fail_must(fmt::format(">= {}", lo));
  if (lo == type_min && hi != type_max && !too_large && x > hi) fail_must(fmt::format("<= {}", hi));
  fail_must(fmt::format("in [{}, {}]", lo, hi));
}

JsonDocument::JsonDocument(nlohmann::json json, std::string source, std::string root_name)
    : json_(std::make_shared<const nlohmann::json>(std::move(json))),
      source_(std::move(source)),
      root_name_(std::move(root_name)) {}

namespace {

// nlohmann's parser and tree recurse once per level: a file of 200 KB nested 100,000 deep overflowed the
// stack in every reader. No input Fulcrum reads nests past a few levels.
constexpr int kMaxDepth = 512;

// Where `text` first nests deeper than kMaxDepth, as "line L, column C" (empty if it does not): brackets
// counted outside strings, before the parser sees them.
std::string too_deep_at(std::string_view text) {
  int depth = 0, line = 1;
  std::size_t line_start = 0;
  bool in_string = false, escaped = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      in_string = escaped || c != '"';
      escaped = !escaped && c == '\\';
    } else if (c == '"') {
      in_string = true;
    } else if ((c == '[' || c == '{') && ++depth > kMaxDepth) {
      return fmt::format("line {}, column {}", line, i - line_start + 1);
    } else if (c == ']' || c == '}') {
      --depth;
    } else if (c == '\n') {
      ++line;
      line_start = i + 1;
    }
  }
  return {};
}

}  // namespace

JsonDocument JsonDocument::parse(std::string_view text, std::string source, std::string root_name) {
  if (const std::string at = too_deep_at(text); !at.empty()) {
    fail("{}{}nested deeper than the {} levels Fulcrum reads (at {})", source, source.empty() ? "" : ": ", kMaxDepth,
         at);
  }
  nlohmann::json json;
  try {
    json = nlohmann::json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::exception& e) {
    // e.what() reads "[json.exception.parse_error.101] parse error at line 3, column 5: ..."; keep the
    // part after the id, which names the position. A number beyond double (1e400) is out_of_range.406,
    // which the parser throws too (found by fuzz/lengths_fuzz).
    std::string why = e.what();
    if (const auto close = why.find("] "); close != std::string::npos) why = why.substr(close + 2);
    fail("{}{}not JSON: {}", source, source.empty() ? "" : ": ", why);
  }
  return JsonDocument(std::move(json), std::move(source), std::move(root_name));
}

JsonDocument JsonDocument::read_file(const std::string& path, std::string root_name) {
  return parse(read_input_file(path, path), path, std::move(root_name));
}

}  // namespace fulcrum

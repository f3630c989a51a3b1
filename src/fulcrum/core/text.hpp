// Small text helpers for parsing specs such as "uniform:1:100" and "lambda:64:4096".
#pragma once

#include <charconv>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace fulcrum {

/// Splits `text` at every `separator`; empty fields are kept ("a::b" gives "a", "", "b").
std::vector<std::string_view> split_fields(std::string_view text, char separator);

/// A comma-separated list of names ("distca,wlb"), empty fields skipped. A name given twice is bad input
/// naming `field`: every list that selects what runs (planners, modes) keys its results by name.
std::vector<std::string> split_names(std::string_view text, std::string_view field);

/// The name of `names` nearest to `word` by edit distance, if it is near enough to be a typo (at most a
/// third of the word's letters off, and at least one letter right); else "".
std::string closest_name(std::string_view word, const std::vector<std::string>& names);

/// `text` read whole as a number of type T (decimal; for reals also inf and nan, which callers range-check);
/// nullopt if it is not one or does not fit T. std::stoi read "0x1" as 0 and "5abc" as 5.
template <typename T>
std::optional<T> parse_whole(std::string_view text) {
  T value{};
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

}  // namespace fulcrum

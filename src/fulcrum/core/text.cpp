#include "fulcrum/core/text.hpp"

#include "fulcrum/core/error.hpp"

#include <algorithm>

namespace fulcrum {

std::vector<std::string_view> split_fields(std::string_view text, char separator) {
  std::vector<std::string_view> fields;
  std::size_t start = 0;
  while (true) {
    const auto pos = text.find(separator, start);
    fields.push_back(text.substr(start, pos == std::string_view::npos ? pos : pos - start));
    if (pos == std::string_view::npos) return fields;
    start = pos + 1;
  }
}

std::vector<std::string> split_names(std::string_view text, std::string_view field) {
  std::vector<std::string> names;
  for (std::string_view name : split_fields(text, ',')) {
    if (name.empty()) continue;
    if (std::find(names.begin(), names.end(), name) != names.end()) {
      fail("{} = '{}': '{}' is named twice", field, text, name);
    }
    names.emplace_back(name);
  }
  return names;
}

namespace {

// Levenshtein distance: insertions, deletions and substitutions, one each.
std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

}  // namespace

std::string closest_name(std::string_view word, const std::vector<std::string>& names) {
  std::string best;
  std::size_t best_distance = std::max<std::size_t>(1, word.size() / 3) + 1;
  for (const std::string& name : names) {
    const std::size_t d = edit_distance(word, name);
    if (d < best_distance && d < std::max(word.size(), name.size())) {
      best = name;
      best_distance = d;
    }
  }
  return best;
}

}  // namespace fulcrum

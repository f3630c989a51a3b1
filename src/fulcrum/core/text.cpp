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

}  // namespace fulcrum

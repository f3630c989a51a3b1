#include "fulcrum/core/text.hpp"

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

}  // namespace fulcrum

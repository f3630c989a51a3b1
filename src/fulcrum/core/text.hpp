// Small text helpers for parsing specs such as "uniform:1:100" and "lambda:64:4096".
#pragma once

#include <string_view>
#include <vector>

namespace fulcrum {

/// Splits `text` at every `separator`; empty fields are kept ("a::b" gives "a", "", "b").
std::vector<std::string_view> split_fields(std::string_view text, char separator);

}  // namespace fulcrum

// Writing `--json PATH` files, with a field-naming error when the path cannot be written.
#pragma once

#include "fulcrum/core/error.hpp"

#include <nlohmann/json.hpp>

#include <fstream>
#include <string>

namespace fulcrum::cli {

inline void write_json(const std::string& path, const nlohmann::json& json) {
  std::ofstream out(path);
  if (!out) fail("json = '{}': cannot be written", path);
  out << json.dump(2) << "\n";
}

}  // namespace fulcrum::cli

// Plain-text tables for stdout: a header, rows of cells, columns sized to fit, numbers right-aligned.
#pragma once

#include <string>
#include <vector>

namespace fulcrum {

class Table {
 public:
  explicit Table(std::vector<std::string> header) : header_(std::move(header)) {}
  void add_row(std::vector<std::string> cells);
  std::string to_string() const;

 private:
  std::vector<std::string> header_;
  std::vector<std::vector<std::string>> rows_;
};

/// 1234567 -> "1.23 MB"; bytes in SI units as network people quote them.
std::string format_bytes(double bytes);

}  // namespace fulcrum

#include "fulcrum/core/statistics.hpp"

#include "fulcrum/core/error.hpp"

#include <algorithm>

namespace fulcrum {

double median(std::vector<double> values) {
  FULCRUM_CHECK(!values.empty(), "median of no values");
  const auto middle = values.begin() + static_cast<std::ptrdiff_t>(values.size() / 2);
  std::nth_element(values.begin(), middle, values.end());
  return *middle;
}

}  // namespace fulcrum

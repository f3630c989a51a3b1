#include "fulcrum/core/memory_budget.hpp"

#include "fulcrum/core/error.hpp"

#include <unistd.h>

namespace fulcrum {

std::uint64_t memory_budget_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_size = sysconf(_SC_PAGE_SIZE);
  // Unknown (never on Linux): no bound from here, the options' stated bounds still hold.
  if (pages <= 0 || page_size <= 0) return UINT64_MAX;
  return static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(page_size);
}

void check_memory_estimate(std::string_view what, double bytes) {
  const double budget = static_cast<double>(memory_budget_bytes());
  if (!(bytes <= budget)) {
    fail("{}: needs about {:.3g} GB of memory, more than this machine's {:.3g} GB", what, bytes / 1e9, budget / 1e9);
  }
}

}  // namespace fulcrum

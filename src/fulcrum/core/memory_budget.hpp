// The up-front memory check of options whose value sizes an allocation (kernel lengths, a rank's tokens, a
// profile grid): the estimate is compared with this machine's memory before any work starts, so an
// impossible size ends at once in an error naming the option instead of in std::bad_alloc (or the OOM
// killer) after minutes of work.
#pragma once

#include <cstdint>
#include <string_view>

namespace fulcrum {

/// This machine's physical memory in bytes (sysconf); what one request may at most ask for.
std::uint64_t memory_budget_bytes();

/// Fails (bad input) "WHAT: needs about X GB of memory, more than this machine's Y GB" when the estimate
/// `bytes` (of what the request allocates; may exceed 2^64, hence double) is above memory_budget_bytes().
/// `what` names the option and its value, e.g. "lengths = 100000000".
void check_memory_estimate(std::string_view what, double bytes);

}  // namespace fulcrum

// Mask lists for tests that must cover every kind: a test's hand-picked masks (sized for its
// documents) plus the mask table's example of any kind the list lacks, so a kind added to the table
// is tested by every such test without editing it. Test-only.
#pragma once

#include "fulcrum/workload/mask.hpp"

#include <algorithm>
#include <vector>

namespace fulcrum::testing {

/// `tuned`, then the table's example (workload/mask.hpp) of every kind `tuned` has no mask of.
inline std::vector<MaskSpec> with_every_kind(std::vector<MaskSpec> tuned) {
  for (const auto& row : mask_kind_table()) {
    const bool present = std::any_of(tuned.begin(), tuned.end(), [&](const MaskSpec& m) { return m.kind == row.kind; });
    if (!present) tuned.push_back(MaskSpec::parse(row.example));
  }
  return tuned;
}

/// The table's example of every kind, in table order.
inline std::vector<MaskSpec> mask_examples() { return with_every_kind({}); }

}  // namespace fulcrum::testing

// plan::verify for Assignments: the law every plan obeys, whatever planner made it.
//  - placement: every document's tokens live on exactly one valid rank;
//  - exact coverage: every visible (query, key) pair of every document is computed exactly once;
//  - FLOPs conservation: the tasks' pair counts add up to the documents';
//  - traffic: every task's Q rows and visible K/V keys are on its server (owned or sent there by a
//    transfer from a rank that owns them), and every row's O+LSE is sent back to the row's owner.
#pragma once

#include "fulcrum/plan/assignment.hpp"

#include <string>
#include <vector>

namespace fulcrum {

struct VerifyReport {
  std::vector<std::string> errors;  // empty when the assignment is valid; capped at a few dozen
  bool ok() const { return errors.empty(); }
  std::string summary() const;
};

VerifyReport verify(const Assignment& assignment);

/// Placement, well-formed tasks and exact coverage only; the transfers are not looked at (verify_plan
/// checks the data movement of compiled Programs itself).
VerifyReport verify_coverage(const Assignment& assignment);

/// Also checks that the assignment computes exactly the documents of `input` (planners that keep the
/// input's documents; WLB-style planners that defer documents are checked with `verify` alone).
VerifyReport verify(const Assignment& assignment, const Batch& input);

}  // namespace fulcrum

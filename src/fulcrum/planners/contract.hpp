// What every planner's output must satisfy, checked by Planner::plan around each strategy's do_plan.
// Cheap (linear in tasks and segments): exact coverage is plan::verify's job, run by whoever compiles.
#pragma once

#include "fulcrum/planners/planner.hpp"

#include <string_view>

namespace fulcrum {

/// Bad input (a bad-input Error naming the field): a batch whose shape or segments are inconsistent, or
/// a document whose mask the planner does not plan for.
void check_planner_input(const Batch& batch, std::string_view planner, const PlannerCapabilities& caps);

/// A planner bug (an internal Error naming the planner and the broken rule): tasks outside their
/// documents or the model's q heads (Assignment::q_heads) or with servers out of range, divisions on
/// some tasks only, or a declared capability that does not hold (placement, documents, attention moved,
/// documents split, heads split).
void check_planner_contract(const Assignment& a, const Batch& input, const PlannerCapabilities& caps);

}  // namespace fulcrum

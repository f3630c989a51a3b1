#include "fulcrum/planners/planner.hpp"

#include "fulcrum/core/error.hpp"
#include "fulcrum/plan/verify.hpp"
#include "fulcrum/planners/contract.hpp"

#include <algorithm>
#include <limits>

namespace fulcrum {

std::string_view Planner::name() const {
  FULCRUM_CHECK(registration_ != nullptr, "a planner made outside make_planner has no registration");
  return registration_->name;
}

const PlannerCapabilities& Planner::capabilities() const {
  FULCRUM_CHECK(registration_ != nullptr, "a planner made outside make_planner has no registration");
  return registration_->capabilities;
}

void Planner::check_batch(const Batch& batch) const {
  check_planner_input(batch, name(), capabilities());
  for (const OptionSpec& spec : registration_->options) {
    if (spec.at_most_tokens_per_rank && options_.get(spec) > static_cast<double>(batch.tokens_per_rank)) {
      fail("{} = {}: must be at most tokens-per-rank = {}", spec.name, options_.get(spec), batch.tokens_per_rank);
    }
  }
  check_batch_size(batch);
}

Assignment Planner::plan(const Batch& batch) {
  check_batch(batch);
  Assignment a = do_plan(batch);
  a.planner = std::string(name());
  check_planner_contract(a, batch, capabilities());
  if (!capabilities().defers_documents && deferred_documents() > 0) {
    throw Error(fmt::format("planner {}: holds {} documents back, but it declares that it defers none", name(),
                            deferred_documents()),
                ErrorKind::kInternal);
  }
  return a;
}

void check_verified(const Planner& planner, const Assignment& a, const Batch& batch) {
  const auto report = planner.capabilities().keeps_documents ? verify(a, batch) : verify(a);
  if (!report.ok()) {
    throw Error(fmt::format("planner {}: the plan fails the verifier: {}", a.planner, report.summary()),
                ErrorKind::kInternal);
  }
}

Assignment plan_verified(Planner& planner, const Batch& batch) {
  Assignment a = planner.plan(batch);
  check_verified(planner, a, batch);
  return a;
}

Tokens Planner::longest_whole_document(Tokens, int) const { return std::numeric_limits<Tokens>::max(); }

Range visible_key_hull(const Document& doc, std::span<const Range> queries) {
  Range hull{doc.length, 0};
  for (const auto& q : queries) {
    for (const auto& k : doc.planning_mask().keys_needed(q, {0, doc.length}, doc.length)) {
      hull.begin = std::min(hull.begin, k.begin);
      hull.end = std::max(hull.end, k.end);
    }
  }
  return hull;
}

}  // namespace fulcrum

#include "fulcrum/sim/system_planner.hpp"

#include "fulcrum/core/error.hpp"
#include "fulcrum/plan/verify.hpp"

namespace fulcrum::sim {

SystemPlanner::SystemPlanner(std::string system, const PlannerOptions& options, int cp)
    : system_(std::move(system)), cp_(cp) {
  if (cp < 1) fail("cp = {}: must be >= 1", cp);
  PlannerOptions o = options;
  o.cp_degree = cp;
  planner_ = make_planner(system_, o);
  if (system_ == "wlb" && cp > 1) cp_planner_ = make_planner("perdoc-cp", o);
}

std::size_t SystemPlanner::deferred_documents() const { return planner_->deferred_documents(); }

void SystemPlanner::drain() { planner_->drain(); }

Assignment SystemPlanner::plan(const Batch& batch) {
  if (batch.ranks % cp_ != 0) fail("cp = {}: must divide the batch's {} ranks", cp_, batch.ranks);
  Assignment a;
  if (!cp_planner_) {
    a = planner_->plan(batch);
  } else {
    // WLB-LLM packs documents into one micro-batch per CP group ...
    Batch groups = batch;
    groups.ranks = batch.ranks / cp_;
    groups.tokens_per_rank = batch.tokens_per_rank * cp_;
    const Assignment packed = planner_->plan(groups);
    // ... whose documents per-document CP then spreads over the group's cp ranks (it re-cuts every
    // document a group holds into 2 cp chunks, so placing them on the group's first rank suffices).
    Batch spread = packed.batch;
    spread.ranks = batch.ranks;
    spread.tokens_per_rank = batch.tokens_per_rank;
    for (auto& s : spread.segments) s.rank *= cp_;
    a = cp_planner_->plan(spread);
    a.planner = system_;
  }
  const auto report = verify(a);
  if (!report.ok()) fail_runtime("system {}: the plan fails the verifier: {}", system_, report.summary());
  return a;
}

}  // namespace fulcrum::sim

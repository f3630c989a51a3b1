// Baseline "perdoc-cp": per-document context parallelism. Ranks form groups of cp_degree; the tokens a
// group holds are re-laid out per document in 2*cp chunks, rank i of the group owning chunks i and
// 2cp-1-i (the causal load-balancing "zigzag" of Megatron CP), and every rank all-gathers the document's
// K/V inside its group, which is the redundant traffic and memory this baseline is known for.
#pragma once

#include "fulcrum/planners/planner.hpp"

namespace fulcrum {

class PerDocCpPlanner : public Planner {
 public:
  explicit PerDocCpPlanner(const PlannerOptions& options) : options_(options) {}
  std::string_view name() const override { return "perdoc-cp"; }
  PlannerCapabilities capabilities() const override;
  Assignment plan(const Batch& batch) override;

 private:
  PlannerOptions options_;
};

}  // namespace fulcrum

// Baseline "perdoc-cp": per-document context parallelism. Ranks form groups of cp_degree; the tokens a
// group holds are re-laid out per document in 2*cp chunks, rank i of the group owning chunks i and
// 2cp-1-i (the causal load-balancing "zigzag" of Megatron CP), and every rank all-gathers the document's
// K/V inside its group, which is the redundant traffic and memory this baseline is known for.
#pragma once

#include "fulcrum/planners/planner.hpp"

namespace fulcrum {

class PerDocCpPlanner : public Planner {
 public:
  /// `cp`: ranks per group (0: 8, a node's worth); a last group may be smaller.
  explicit PerDocCpPlanner(int cp) : cp_(cp == 0 ? 8 : cp) {}

 protected:
  Assignment do_plan(const Batch& batch) override;

 private:
  int cp_;
};

PlannerRegistration perdoc_cp_registration();
/// Per-document CP over groups of `cp` ranks (the last may be smaller): what PerDocCpPlanner plans, and
/// what wlb runs inside its groups.
Assignment per_document_cp(const Batch& batch, int cp);
/// `cp-degree`, read by perdoc-cp and wlb: ranks per context-parallel group (0: each planner's default).
const OptionSpec& cp_degree_option();

}  // namespace fulcrum

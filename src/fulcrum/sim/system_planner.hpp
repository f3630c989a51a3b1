// A training system's attention strategy over the TP groups of one pipeline stage, kept across the
// micro-batches and iterations of a run (WLB-LLM's outlier queue defers documents to later ones).
// Every registered planner is a system; `wlb` with cp > 1 is WLB-LLM as its paper runs it:
// variable-length packing of whole documents into the dp / cp context-parallel groups (each a
// micro-batch of cp x tokens-per-rank under the token cap), then per-document CP inside each group.
#pragma once

#include "fulcrum/planners/planner.hpp"

#include <memory>
#include <string>

namespace fulcrum::sim {

class SystemPlanner {
 public:
  /// `cp`: TP groups per context-parallel group (perdoc-cp and wlb); must divide every batch's ranks.
  SystemPlanner(std::string system, const PlannerOptions& options, int cp);
  /// Plans one micro-batch; the Assignment passes the exact-coverage verifier (checked here).
  Assignment plan(const Batch& batch);
  const std::string& system() const { return system_; }
  /// Documents the system holds back for later micro-batches (WLB-LLM's queues); 0 for the others.
  std::size_t deferred_documents() const;
  /// From now on release everything held back as soon as it fits (the end of a run).
  void drain();

 private:
  std::string system_;
  int cp_;
  std::unique_ptr<Planner> planner_;     // the system's planner (for wlb: over CP groups)
  std::unique_ptr<Planner> cp_planner_;  // wlb with cp > 1: per-document CP inside each group
};

}  // namespace fulcrum::sim

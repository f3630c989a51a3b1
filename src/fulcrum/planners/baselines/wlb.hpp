// Baseline "wlb" (WLB-LLM): variable-length packing of whole documents into one micro-batch per
// context-parallel group, balancing estimated work instead of tokens, under a per-micro-batch token cap
// S_max; plus the multi-level outlier-delay queue that holds very long documents back until a whole round
// of them can be spread one per micro-batch. With `cp-degree` 1 (the default) a group is one rank and
// attention never moves, so there is no traffic; the price is memory imbalance (micro-batches hold
// different token counts) and documents deferred to later iterations. With cp > 1 it is WLB-LLM as its
// paper runs it: the packing is over ranks / cp groups of cp x tokens-per-rank each, and per-document
// context parallelism spreads every document a group holds over the group's cp ranks.
#pragma once

#include "fulcrum/planners/baselines/perdoc_cp.hpp"
#include "fulcrum/planners/planner.hpp"

#include <deque>

namespace fulcrum {

class WlbPlanner : public Planner {
 public:
  explicit WlbPlanner(const PlannerOptions& options);
  /// Documents waiting for a later iteration (outlier queues and those that did not fit).
  std::size_t deferred_documents() const override;
  Tokens deferred_tokens() const;
  /// While draining (the end of a run), outlier queues release what they hold without waiting for a
  /// full round, so every document drawn is eventually computed and a finite run's throughput is not
  /// flattered by the long documents still waiting.
  void drain() override { draining_ = true; }
  /// The outlier queues, then the carried regular documents.
  std::vector<std::vector<Document>> held_documents() const override;
  void restore_held_documents(const std::vector<std::vector<Document>>& held) override;
  /// S_max of a group: documents longer than wlb-token-cap x cp x tokens-per-rank are cut.
  Tokens longest_whole_document(Tokens tokens_per_rank, int cp) const override;

 protected:
  /// Packs the batch's documents (and those deferred earlier) into one micro-batch per group.
  Assignment do_plan(const Batch& batch) override;

 private:
  Assignment pack(const Batch& groups);

  ModelShape model_;
  double token_cap_;
  int cp_;
  static constexpr int kOutlierLevels = 2;
  std::deque<Document> outliers_[kOutlierLevels];  // level l: lengths >= S_max / 2^(levels - l)
  std::vector<Document> carried_;                  // regular documents that did not fit last time
  bool draining_ = false;
};

PlannerRegistration wlb_registration();

}  // namespace fulcrum

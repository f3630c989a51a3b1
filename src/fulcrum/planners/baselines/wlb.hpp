// Baseline "wlb" (WLB-LLM): variable-length packing of whole documents into one micro-batch per rank,
// balancing estimated work instead of tokens, under a per-micro-batch token cap S_max; plus the
// multi-level outlier-delay queue that holds very long documents back until a whole round of them can
// be spread one per micro-batch. Attention never moves, so there is no traffic; the price is memory
// imbalance (micro-batches hold different token counts) and documents deferred to later iterations.
#pragma once

#include "fulcrum/planners/planner.hpp"

#include <deque>

namespace fulcrum {

class WlbPlanner : public Planner {
 public:
  explicit WlbPlanner(const PlannerOptions& options) : options_(options) {}
  std::string_view name() const override { return "wlb"; }
  PlannerCapabilities capabilities() const override;
  /// Packs the batch's documents (and those deferred earlier) into batch.ranks micro-batches.
  Assignment plan(const Batch& batch) override;
  /// Documents waiting for a later iteration (outlier queues and those that did not fit).
  std::size_t deferred_documents() const override;
  Tokens deferred_tokens() const;
  /// While draining (the end of a run), outlier queues release what they hold without waiting for a
  /// full round, so every document drawn is eventually computed and a finite run's throughput is not
  /// flattered by the long documents still waiting.
  void drain() override { draining_ = true; }

 private:
  PlannerOptions options_;
  static constexpr int kOutlierLevels = 2;
  std::deque<Document> outliers_[kOutlierLevels];  // level l: lengths >= S_max / 2^(levels - l)
  std::vector<Document> carried_;                   // regular documents that did not fit last time
  bool draining_ = false;
};

}  // namespace fulcrum

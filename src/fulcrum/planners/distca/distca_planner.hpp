// The DistCA planner: core-attention disaggregation with in-place attention servers. Tokens stay where
// the packing put them (balanced context-independent layers and memory); the communication-aware
// greedy scheduler moves CA-task shards between servers until attention FLOPs are balanced.
#pragma once

#include "fulcrum/planners/planner.hpp"

namespace fulcrum {

class DistcaPlanner : public Planner {
 public:
  explicit DistcaPlanner(const PlannerOptions& options);

 protected:
  Assignment do_plan(const Batch& batch) override;

 private:
  ModelShape model_;
  double tolerance_;
  Tokens granularity_;
  double overshoot_;
  bool partial_kv_;
  double busiest_first_;
  bool rehome_;
  double rehome_bytes_;  // how far above its start the re-homing pass may take total bytes (a fraction)
};

PlannerRegistration distca_registration();

}  // namespace fulcrum

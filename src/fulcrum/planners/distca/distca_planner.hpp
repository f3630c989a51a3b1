// The DistCA planner: core-attention disaggregation with in-place attention servers. Tokens stay where
// the packing put them (balanced context-independent layers and memory); the communication-aware
// greedy scheduler moves CA-task shards between servers until attention FLOPs are balanced.
#pragma once

#include "fulcrum/planners/distca/rehome.hpp"
#include "fulcrum/planners/distca/scheduler.hpp"
#include "fulcrum/planners/planner.hpp"

namespace fulcrum {

/// DistCA's options, read from their declarations (distca_planner.cpp): the scheduler's, and the re-homing
/// pass's when `rehome` is on.
struct DistcaOptions {
  distca::SchedulerOptions scheduler;
  bool rehome;
  distca::RehomeLimits rehome_limits;
};
DistcaOptions distca_options(const PlannerOptions& options);

class DistcaPlanner : public Planner {
 public:
  explicit DistcaPlanner(const PlannerOptions& options);

 protected:
  Assignment do_plan(const Batch& batch) override;

 private:
  ModelShape model_;
  DistcaOptions options_;
};

PlannerRegistration distca_registration();

}  // namespace fulcrum

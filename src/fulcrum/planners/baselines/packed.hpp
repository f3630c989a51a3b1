// Baseline "packed": every rank computes the attention of the rows it holds after packing. No CA-task
// moves; the only traffic is the K/V prefix a rank needs for a document the packing split across ranks.
#pragma once

#include "fulcrum/planners/planner.hpp"

namespace fulcrum {

class PackedPlanner : public Planner {
 public:
  explicit PackedPlanner(const PlannerOptions& options) : options_(options) {}
  std::string_view name() const override { return "packed"; }
  PlannerCapabilities capabilities() const override;
  Assignment plan(const Batch& batch) override;

 private:
  PlannerOptions options_;
};

}  // namespace fulcrum

// Baselines "ring" and "zigzag": static context parallelism over the whole packed sequence, as ring
// attention runs it. The placement is fixed: ring keeps the packing's contiguous equal chunks (rank r
// holds chunk r); zigzag cuts the sequence into 2n equal chunks and rank r holds chunks r and
// 2n − 1 − r. Each rank computes its own rows against every chunk in n steps, the mask applied per step
// (tiles no row can see are skipped), but every chunk's K/V still travels to every rank, needed or
// not: that redundant traffic is what the Assignment's transfers count.
#pragma once

#include "fulcrum/planners/planner.hpp"

namespace fulcrum {

enum class CpLayout { kRing, kZigzag };

class StaticCpPlanner : public Planner {
 public:
  StaticCpPlanner(const PlannerOptions& options, CpLayout layout) : options_(options), layout_(layout) {}
  std::string_view name() const override { return layout_ == CpLayout::kRing ? "ring" : "zigzag"; }
  PlannerCapabilities capabilities() const override;
  Assignment plan(const Batch& batch) override;

 private:
  PlannerOptions options_;
  CpLayout layout_;
};

}  // namespace fulcrum

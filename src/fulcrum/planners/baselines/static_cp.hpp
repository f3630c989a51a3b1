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
  explicit StaticCpPlanner(CpLayout layout) : layout_(layout) {}

 protected:
  Assignment do_plan(const Batch& batch) override;

 private:
  CpLayout layout_;
};

PlannerRegistration ring_registration();
PlannerRegistration zigzag_registration();

}  // namespace fulcrum

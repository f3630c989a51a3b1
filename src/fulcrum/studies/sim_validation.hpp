// The simulator against reality: the plans `fulcrum run` executed, replayed by sim::simulate_plan on a
// HardwareModel (cpu-local: this machine, calibrated), compared per rank (attention time) and per pass
// (the slowest rank's program time, forward + backward).
#pragma once

#include "fulcrum/cost/hardware_model.hpp"
#include "fulcrum/studies/attention_job.hpp"

#include <string>
#include <vector>

namespace fulcrum::studies {

struct SimValidation {
  std::string planner, mode;
  std::vector<double> measured_attention_s, predicted_attention_s;  // per rank, forward + backward
  double measured_iteration_s = 0, predicted_iteration_s = 0;       // forward + backward pass times

  double worst_attention_error() const;  // max over ranks of |predicted / measured - 1|
  double iteration_error() const;
};

SimValidation validate_with_simulator(const JobResult& job, const HardwareModel& hardware);

}  // namespace fulcrum::studies

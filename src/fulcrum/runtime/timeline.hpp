// What the executor records: one event per instruction per rank (start, end, bytes, FLOPs), plus one
// event per communication launch on the rank's communication track (launched until all of its
// messages completed). Exported as a Chrome trace by report/chrome_trace.hpp.
#pragma once

#include <string>
#include <vector>

namespace fulcrum::runtime {

enum class Track { kCompute, kComm };

struct TimelineEvent {
  int rank = 0;
  Track track = Track::kCompute;
  int stream = 0;      // nano-batch
  std::string name;    // "attention", "attention-backward", "reduce", "copy", "wait", "dispatch", ...
  double start_s = 0;  // seconds since the job's common start
  double end_s = 0;
  double bytes = 0;  // moved (comm) or read+written (copy, reduce)
  double flops = 0;  // attention
};

struct Timeline {
  std::vector<TimelineEvent> events;
};

}  // namespace fulcrum::runtime

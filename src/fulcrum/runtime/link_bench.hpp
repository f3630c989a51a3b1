// Measuring this machine's links for the simulator's cpu-local model: message ping-pong between ranks 0
// and 1 over a Communicator (one-way time per size, median of repeats), and memcpy bandwidth.
#pragma once

#include "fulcrum/runtime/communicator.hpp"

#include <cstddef>
#include <vector>

namespace fulcrum::runtime {

struct LinkSample {
  std::size_t bytes = 0;
  double one_way_s = 0;  // median over repeats of half a round trip
};

struct LinkMeasurement {
  std::vector<LinkSample> samples;
  double latency_s = 0;              // the smallest message's one-way time
  double bandwidth_bytes_per_s = 0;  // largest message: bytes / (one-way time - latency)
  double memcpy_bytes_per_s = 0;     // bytes read + written per second by one memcpy of the largest size
};

/// Every rank calls it; ranks 0 and 1 exchange, the others only join the barriers. Needs >= 2 ranks.
LinkMeasurement measure_link(Communicator& comm, const std::vector<std::size_t>& sizes, int repeats);

}  // namespace fulcrum::runtime

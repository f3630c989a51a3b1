// Attention time as a function of shard shape: a grid of measured throughputs over (query length, key
// length), interpolated bilinearly. Past the grid the throughput saturates at the edge value measured
// there, which is how kernels behave once tiles are full; below it a shard takes as long as one of the
// smallest measured length (a partial tile costs a whole one), so the throughput falls in proportion. `fulcrum profile`
// fills it from real runs; until then `from_peak` gives the FLOPs-based default.
#pragma once

#include "fulcrum/core/interval.hpp"
#include "fulcrum/core/json_reader.hpp"

#include <nlohmann/json_fwd.hpp>

#include <string>
#include <vector>

namespace fulcrum {

struct ThroughputGrid {
  std::vector<Tokens> query_lengths;  // ascending
  std::vector<Tokens> key_lengths;    // ascending
  std::vector<double> flops_per_s;    // row-major [query][key]
  double at(Tokens q_len, Tokens k_len) const;
  void validate(const std::string& name) const;
};

class ProfileTable {
 public:
  /// A flat table: every shape runs at `flops_per_s` forward and backward.
  static ProfileTable from_peak(double flops_per_s);
  static ProfileTable from_json(const nlohmann::json& json);
  /// From a JSON reader cursor (core/json_reader.hpp): errors name its file and path.
  static ProfileTable from_json(const JsonValue& json);
  static ProfileTable load(const std::string& path);
  nlohmann::json to_json() const;

  double forward_s(Tokens q_len, Tokens k_len, double flops) const { return flops / forward_.at(q_len, k_len); }
  double backward_s(Tokens q_len, Tokens k_len, double flops) const { return flops / backward_.at(q_len, k_len); }

  ThroughputGrid& forward() { return forward_; }
  ThroughputGrid& backward() { return backward_; }
  const ThroughputGrid& forward() const { return forward_; }
  const ThroughputGrid& backward() const { return backward_; }

 private:
  ThroughputGrid forward_, backward_;
};

}  // namespace fulcrum

// Every rank's layer times, gathered (all_gather, so every rank has them), and what FlexAttn reports from
// them: per layer the spread (max − min) / max of the ranks' attention time, and throughput.
#pragma once

#include "fulcrum/prefill/tp_prefill.hpp"

#include <vector>

namespace fulcrum::prefill {

struct PrefillReport {
  int ranks = 0;
  long tokens = 0;
  std::vector<std::vector<LayerTimes>> times;  // [rank][layer]
  std::vector<double> total_s;                 // [rank]

  /// (max − min) / max over ranks of layer `layer`'s attention time (0 when every rank took 0).
  double attention_spread(int layer) const;
  /// The mean of attention_spread over layers.
  double mean_attention_spread() const;
  /// The slowest rank's wall time.
  double latency_s() const;
  double tokens_per_s() const;
  /// Sum over layers of one field, for one rank.
  LayerTimes rank_total(int rank) const;
};

/// Field by field (each rank, layer and time) the median over `runs` of one configuration.
PrefillReport median_report(const std::vector<PrefillReport>& runs);

/// Collective: every rank passes its own result and gets everyone's.
PrefillReport gather_prefill_report(const RankPrefill& mine, long tokens, runtime::Communicator& comm);

}  // namespace fulcrum::prefill

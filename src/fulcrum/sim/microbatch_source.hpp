// The micro-batches `fulcrum simulate` trains on: document lengths from the configuration's dataset, each cut
// into pieces of at most max_doc_len and packed in order over the TP groups; under MTraining's dynamic mask,
// every estimated document carries the per-head masks the estimator finds on its synthetic data.
#pragma once

#include "fulcrum/sim/training.hpp"
#include "fulcrum/sparse/dynamic_mask.hpp"
#include "fulcrum/workload/batch.hpp"
#include "fulcrum/workload/length_source.hpp"

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

namespace fulcrum::sim {

class MicrobatchSource {
 public:
  MicrobatchSource(const TrainingConfig& c, int ranks, const ModelShape& model);
  /// The next micro-batch.
  Batch next();

 private:
  Tokens next_piece(Tokens max);
  // The estimator's masks on the document's synthetic data, once per document: every planner simulated
  // with this configuration plans the same masks.
  std::vector<MaskSpec> dynamic_masks(const Document& doc);

  std::unique_ptr<LengthSource> lengths_;
  std::optional<sparse::DynamicMaskSpec> dynamic_;
  Tokens pending_ = 0;
  BatchStream stream_;
  std::uint64_t seed_;
  sparse::EstimatorShape shape_;
};

}  // namespace fulcrum::sim

// The collectives the vertical-slash estimator needs when its keys are spread over ranks: element-wise
// max and sum, and a broadcast of the observation rows from the last rank (which holds the sequence's
// tail). The estimator makes the same calls, with the same sizes, in the same order on every rank, so
// an implementation over any communicator only has to combine them; the runtime's is built on
// all_gather, single processes use SingleProcessReduce.
#pragma once

#include <span>

namespace fulcrum::sparse {

class EstimatorReduce {
 public:
  virtual ~EstimatorReduce() = default;
  /// values[i] = max over ranks of values[i], in place.
  virtual void max(std::span<double> values) = 0;
  /// values[i] = sum over ranks of values[i], in place, added in rank order (the estimator's values are
  /// quantised so that any order gives the same bits, but a fixed order keeps that from mattering).
  virtual void sum(std::span<double> values) = 0;
  /// Every rank's `values` become the last rank's.
  virtual void broadcast_from_last(std::span<float> values) = 0;
};

/// One rank holding everything: every collective is the identity.
class SingleProcessReduce final : public EstimatorReduce {
 public:
  void max(std::span<double>) override {}
  void sum(std::span<double>) override {}
  void broadcast_from_last(std::span<float>) override {}
};

}  // namespace fulcrum::sparse

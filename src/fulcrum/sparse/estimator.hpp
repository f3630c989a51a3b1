// MTraining's online vertical-slash estimator (spec mtraining.md section 1), per q head, from the actual
// Q and K, on ranks that each hold some of the keys:
//  1. the observation rows (the last `window` positions) against every key: logits q.k / sqrt(d), GQA
//     (q head h reads kv head h / (q_heads / kv_heads)), causal;
//  2. a softmax per row with the global max and sum, divided by the rows, so A sums to 1;
//  3. vertical[k] = column sums of A, slash[d] = sums of A over q - k = d;
//  4.-5. select_by_mass and slash_block_offsets (vertical_slash.hpp); recall is the mass of A the
//     blockified mask keeps.
// Every rank ends with the identical index, bit for bit, whatever the split of the keys: max is exact,
// and every term that is summed (exp values for the row sums, entries of A) is first rounded down to a
// multiple of a power of two small enough that all the partial sums are exact in fp64, so the order
// of addition (within a rank, over ranks) cannot change a bit. The rounding costs under 1e-9 of mass.
// Cost: O(window * keys * head_dim) per q head for the logits, which are kept (window x local keys
// floats per q head) so the later passes do not recompute them.
#pragma once

#include "fulcrum/core/interval.hpp"
#include "fulcrum/sparse/estimator_reduce.hpp"
#include "fulcrum/sparse/vertical_slash.hpp"

#include <span>
#include <vector>

namespace fulcrum::sparse {

struct EstimatorShape {
  int q_heads = 1;
  int kv_heads = 1;
  int head_dim = 1;
  /// fail()s naming the field: heads and head_dim >= 1, q_heads a multiple of kv_heads.
  void validate() const;
};

/// A rank's keys: token-major [rows][kv_heads][head_dim] fp32 and each row's document position. Over
/// all ranks the positions must be [0, doc_len), each once.
struct KeyRows {
  std::span<const float> k;
  std::span<const Tokens> positions;
};

struct VerticalSlashEstimate {
  std::vector<VerticalSlashIndex> heads;    // per q head
  std::vector<VerticalSlashScores> scores;  // per q head, the token-level scores the index came from
};

/// The estimator on one rank. `q_obs` is [window][q_heads][head_dim] fp32 for positions
/// [doc_len - window, doc_len) on the last rank (broadcast from there); other ranks may pass it empty.
/// Collectives, in this order on every rank: broadcast_from_last(q rows), max(row maxima), sum(row
/// sums and key count), sum(scores), sum(recall).
VerticalSlashEstimate estimate_vertical_slash(const EstimatorShape& shape, Tokens doc_len, std::span<const float> q_obs,
                                              const KeyRows& keys, const VerticalSlashOptions& options,
                                              EstimatorReduce& reduce);

/// Single process: every key of the document in `keys`.
inline VerticalSlashEstimate estimate_vertical_slash(const EstimatorShape& shape, Tokens doc_len,
                                                     std::span<const float> q_obs, const KeyRows& keys,
                                                     const VerticalSlashOptions& options) {
  SingleProcessReduce identity;
  return estimate_vertical_slash(shape, doc_len, q_obs, keys, options, identity);
}

}  // namespace fulcrum::sparse

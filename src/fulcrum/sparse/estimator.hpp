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
// multiple of a power of two small enough that all the partial sums are exact (added as int64 counts of
// that power within a rank, in fp64 over ranks), so the order of addition cannot change a bit. Each
// term is the same element-wise function of its (row, key) on every rank: the logit an fp32 sum in
// element order, exp an fp32 polynomial (core/simd.hpp's exp2_bounded), A's entry the exp value times
// one per-row fp32 factor computed from the global row sum; every element goes through the same vector
// instructions (the rows padded to whole vectors, no scalar remainder). Rounding A's entries to 2^-50
// loses under window x keys x 2^-50 of mass (1e-8 at 128K); rounding the exp values for the row sums
// to 2^-(52 - bit_width(doc_len)) leaves each row sum (>= 1) short by under doc_len times that (8e-6
// at 128K), which scales that row's entries up by as much.
// Cost: O(window * keys * head_dim) per q head for the logits (a register-blocked fp32 product), which
// are kept, key-major (local keys x window rounded up to 64, floats per q head), so that the later
// passes stream them instead of recomputing them; each later pass is a few vector operations per entry.
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

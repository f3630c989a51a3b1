// The vertical-slash sparse pattern as MTraining estimates it (docs spec mtraining.md section 1): the
// options that bound it, the per-head index it produces, and the two pure steps after the scores,
// selecting by cumulative attention mass and blockifying slashes into block diagonals.
#pragma once

#include "fulcrum/core/interval.hpp"

#include <span>
#include <vector>

namespace fulcrum::sparse {

/// The estimator's knobs. Defaults are the published training runs' (gamma 0.9, window 64, cap 4096);
/// block is the tile granularity G (MTraining's code uses 128, its paper 64).
struct VerticalSlashOptions {
  double gamma = 0.9;  // recall target: each kind keeps the fewest entries whose scores reach gamma
  Tokens block = 64;   // G
  Tokens cap = 4096;   // most entries kept per kind, rounded down to a multiple of G
  Tokens window = 64;  // observation rows: the last `window` query positions of the document

  /// fail()s naming the field: gamma in (0, 1], block >= 1, window in [1, doc_len], cap >= block.
  void validate(Tokens doc_len) const;
  /// The cap rounded down to a multiple of the block.
  Tokens effective_cap() const { return cap / block * block; }
};

/// One q head's pattern. (q, k) is visible iff k <= q and ((q / block - k / block) is in block_offsets or k
/// is in verticals); both lists are sorted and distinct.
struct VerticalSlashIndex {
  Tokens block = 64;
  std::vector<Tokens> verticals;      // key positions every query attends to
  std::vector<Tokens> block_offsets;  // active block diagonals q_block - k_block
  double recall = 0.0;                // attention mass of the observation rows this mask keeps
  friend bool operator==(const VerticalSlashIndex&, const VerticalSlashIndex&) = default;
};

/// Token-level scores of one q head: vertical[k] = attention mass on key k, slash[d] = mass on q - k = d,
/// both over the observation rows (each vector sums to 1, up to the estimator's quantisation).
struct VerticalSlashScores {
  std::vector<double> vertical;
  std::vector<double> slash;
};

/// Step 4: the entries with the largest scores (ties: lower index first), the fewest whose cumulative
/// score reaches gamma times the total, at most `cap` of them; entry 0 is always kept, so no query row
/// is left without keys (key 0, offset 0). Sorted ascending.
std::vector<Tokens> select_by_mass(std::span<const double> scores, double gamma, Tokens cap);

/// Step 5: a slash at offset d activates block diagonals floor(d / block) and ceil(d / block), which
/// together cover every (q, k) with q - k = d. Sorted, distinct.
std::vector<Tokens> slash_block_offsets(std::span<const Tokens> slashes, Tokens block);

/// Steps 4 and 5 from one head's scores (recall left at 0: it needs the attention matrix).
VerticalSlashIndex index_from_scores(const VerticalSlashScores& scores, const VerticalSlashOptions& options);

/// The fraction of the causal pairs (k <= q < doc_len) that `index` keeps; the sparsity is 1 minus it.
double kept_pair_fraction(const VerticalSlashIndex& index, Tokens doc_len);

/// Whether `index` keeps (q, k): the mask definition above, one pair at a time (tests, small checks).
bool keeps(const VerticalSlashIndex& index, Tokens q, Tokens k);

}  // namespace fulcrum::sparse

// Synthetic long-context attention inputs with a planted vertical-slash structure (spec mtraining.md
// section 6), so the estimator and sparse attention can be observed without a trained model.
//
// Head_dim d = 2 * pairs + 2. For query position m and key position n, pair j holds
// q = alpha (cos m theta_j, sin m theta_j) and k = (cos n theta_j, sin n theta_j), so the pair adds
// alpha cos((m - n) theta_j) to q.k: a function of the offset only, as with RoPE. The first half of the
// pairs have theta_j = 2 pi j / P (j = 1..): their sum peaks at every multiple of the period P (the
// slashes, the one at 0 being the local band); the rest have slow frequencies pi / (2 R_j), R_j spread
// logarithmically from band_tokens to the document length, which decays with distance (nearer slashes
// weigh more, as with RoPE's low frequencies). Element d - 2 is the vertical term: q = vertical strength,
// k = c_n (about 1) on the heavy tokens (token 0, the sink, and a few random ones), 0 elsewhere; a heavy
// token's key is an outlier with no rotary part, so its logit is the same from every query (without
// that, one whose offset falls on a slash would take most of the mass). Every K element also gets a
// little uniform noise; V and dO are uniform in [-1, 1).
//
// Every value is a function of (seed, tensor, head, position, element), so any rank generates exactly
// its own rows. The pattern (P, frequencies, heavy tokens) lives in the kv head, the strengths in the
// q head (GQA: the q heads of one kv group share its slashes and verticals, with their own strengths),
// and all of it is drawn from the seed: another sample (seed) gives another pattern.
#pragma once

#include "fulcrum/core/interval.hpp"

#include <cstdint>
#include <span>
#include <vector>

namespace fulcrum::sparse {

/// Strengths are logits (after the 1/sqrt(d) scale). With the defaults, head_dim 64, the estimator at
/// G = 64 skips on average 0.92 (gamma 0.9) and 0.89 (gamma 0.95) of the causal pairs at 8K tokens,
/// 0.965 and 0.95 at 32K (4 seeds x 4 heads); every heavy token is a selected vertical.
struct SyntheticOptions {
  double slash_logit = 12.0;     // the periodic pairs' peak, at every multiple of the period
  double band_logit = 4.0;       // the decaying pairs' peak, at offset 0
  double vertical_logit = 15.0;  // a heavy token's logit (times its c_n, in [0.95, 1.05])
  int heavy_tokens = 4;          // heavy tokens besides token 0
  double min_period = 1.0 / 6;   // the period P is drawn in [min_period, max_period] x doc_len
  double max_period = 0.4;
  Tokens band_tokens = 16;  // the fastest decay radius
  double noise = 0.05;      // K elements get uniform noise in [-noise, noise)

  void validate() const;
};

/// One q head's planted pattern.
struct SyntheticPattern {
  Tokens period = 0;
  std::vector<Tokens> slash_offsets;     // 0, P, 2P, ... below the document length
  std::vector<Tokens> vertical_tokens;   // the heavy tokens, sorted; token 0 first
  std::vector<double> vertical_weights;  // their c_n
  double slash_logit = 0.0;              // this q head's strengths
  double band_logit = 0.0;
  double vertical_logit = 0.0;
};

enum class SyntheticTensor { kQ, kK, kV, kDO };

class SyntheticAttention {
 public:
  /// fail()s naming the field: heads >= 1, q_heads a multiple of kv_heads, head_dim even and >= 6,
  /// doc_len >= 2, and the options' ranges.
  SyntheticAttention(std::uint64_t seed, int q_heads, int kv_heads, int head_dim, Tokens doc_len,
                     SyntheticOptions options = {});

  int q_heads() const { return q_heads_; }
  int kv_heads() const { return kv_heads_; }
  int head_dim() const { return head_dim_; }
  Tokens doc_len() const { return doc_len_; }
  /// The heads of a tensor: q heads for Q and dO, kv heads for K and V.
  int heads(SyntheticTensor tensor) const;

  /// One row of one head (head_dim values) at a document position.
  void row(SyntheticTensor tensor, Tokens position, int head, std::span<float> out) const;
  /// Token-major rows [positions][heads(tensor)][head_dim], the kernels' layout.
  void rows(SyntheticTensor tensor, Range positions, std::span<float> out) const;
  std::vector<float> rows(SyntheticTensor tensor, Range positions) const;

  const SyntheticPattern& pattern(int q_head) const { return patterns_.at(static_cast<std::size_t>(q_head)); }

 private:
  struct KvPattern {
    std::vector<double> theta;   // the periodic pairs' frequencies, then the decaying pairs'
    std::vector<Tokens> heavy;   // sorted
    std::vector<double> weight;  // c_n of each heavy token
  };
  double heavy_weight(int kv_head, Tokens position) const;

  std::uint64_t seed_;
  int q_heads_, kv_heads_, head_dim_;
  Tokens doc_len_;
  SyntheticOptions options_;
  int periodic_pairs_ = 0, decay_pairs_ = 0;
  std::vector<KvPattern> kv_;
  std::vector<SyntheticPattern> patterns_;
};

}  // namespace fulcrum::sparse

// FlexAttn's runtime profile report measured on this machine (`fulcrum profile --heads`): per pattern key and
// prompt length, one head's attention forward through the CPU kernels (fp32, the pattern's mask from
// heads::to_mask, as the prefill runs it), and the per-head projection GEMMs through the prefill's BLAS
// (t_qo = Q and O projections of one head, t_qkvo = plus its K and V projections, the shapes the prefill
// multiplies: [T x hidden] x [hidden x head_dim] and [T x head_dim] x [head_dim x hidden]). Medians of
// `repeats` runs after one warm-up each. The result is the heads::RuntimeProfile the cost model reads.
#pragma once

#include "fulcrum/planners/heads/cost_model.hpp"
#include "fulcrum/planners/heads/patterns.hpp"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace fulcrum::prefill {

struct HeadProfileConfig {
  int head_dim = 128;
  int hidden = 4096;
  std::vector<Tokens> prompt_tokens;         // the grid, ascending
  std::vector<heads::HeadPattern> patterns;  // distinct keys
  int repeats = 3;
  int threads = 0;  // attention-kernel and BLAS threads; 0: every core
  std::uint64_t seed = 1;
  bool extrapolate = false;  // written into the profile (lengths outside the grid allowed)

  /// Bad input naming the field (head_dim, hidden, prompt tokens ascending in [1, 2^24], patterns, repeats).
  void validate() const;
};

/// `full` and the distinct patterns (by key) of a report's first `layers` layers, in first-seen order.
std::vector<heads::HeadPattern> profiled_patterns(const heads::HeadPatternReport& report, int layers);

/// Measures every pattern at every grid length; `progress(done, total)` after each measurement.
heads::RuntimeProfile profile_heads(const HeadProfileConfig& config,
                                    const std::function<void(int done, int total)>& progress = {});

}  // namespace fulcrum::prefill

// What a prefill computes, the same on every rank: the model, the prompt length, every layer's per-q-head
// masks (FlexAttn's heterogeneous heads) and the head assignment. The integrator fills `head_masks` from a
// head pattern report and `assignment` from a solver; nothing else changes.
#pragma once

#include "fulcrum/core/interval.hpp"
#include "fulcrum/prefill/head_assignment.hpp"
#include "fulcrum/workload/mask.hpp"
#include "fulcrum/workload/model_shape.hpp"

#include <cstdint>
#include <vector>

namespace fulcrum::prefill {

struct PrefillSpec {
  ModelShape shape;
  Tokens tokens = 0;
  std::vector<std::vector<MaskSpec>> head_masks;  // [layer][q head]: the head's mask over the prompt
  HeadAssignment assignment;                      // [layer][q head] -> rank
  std::uint64_t seed = 1;                         // the prompt's hidden states (prompt_hidden_states)

  /// Bad input naming the field: the shape (and an even head_dim, for RoPE), tokens >= 1, masks per layer
  /// and head that suit a prompt of `tokens` (no index past it), the assignment against `ranks`.
  void validate(int ranks) const;
};

/// The prompt as the first layer sees it: [tokens][hidden], U(-sqrt 3, sqrt 3) (variance 1) from `seed`
/// (a stand-in for token embeddings; the embedding table and the LM head are not part of the prefill here).
std::vector<float> prompt_hidden_states(const ModelShape& shape, Tokens tokens, std::uint64_t seed);

}  // namespace fulcrum::prefill

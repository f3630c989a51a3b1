#include "fulcrum/prefill/prefill_spec.hpp"

#include "fulcrum/core/error.hpp"
#include "fulcrum/core/random.hpp"
#include "fulcrum/workload/head_masks.hpp"

#include <cmath>

namespace fulcrum::prefill {

void PrefillSpec::validate(int ranks) const {
  shape.validate();
  if (shape.head_dim % 2 != 0) fail("model.head_dim = {}: must be even (rotary embedding pairs)", shape.head_dim);
  if (tokens < 1 || tokens > (Tokens{1} << 24)) fail("tokens = {}: must be in [1, {}]", tokens, Tokens{1} << 24);
  if (tokens > (Tokens{1} << 30) / shape.hidden) {
    fail("tokens = {}: tokens x hidden ({}) must stay below 2^30 (activations of one layer)", tokens, shape.hidden);
  }
  if (ranks < 1) fail("ranks = {}: must be >= 1", ranks);
  if (head_masks.size() != static_cast<std::size_t>(shape.layers)) {
    fail("head_masks: {} layers: the model has {}", head_masks.size(), shape.layers);
  }
  for (std::size_t l = 0; l < head_masks.size(); ++l) {
    const auto field = fmt::format("head_masks[{}]", l);
    if (head_masks[l].size() != static_cast<std::size_t>(shape.q_heads)) {
      fail("{}: {} masks: the model has {} q heads", field, head_masks[l].size(), shape.q_heads);
    }
    check_mask_lengths(MaskSpec::causal(), head_masks[l], tokens, field);
    for (std::size_t h = 0; h < head_masks[l].size(); ++h) {
      check_mask_reach(head_masks[l][h], tokens, fmt::format("{}[{}]", field, h));
    }
  }
  validate_assignment(assignment, shape, ranks, "assignment");
}

std::vector<float> prompt_hidden_states(const ModelShape& shape, Tokens tokens, std::uint64_t seed) {
  std::vector<float> x(static_cast<std::size_t>(tokens) * static_cast<std::size_t>(shape.hidden));
  Rng rng(mix64(seed ^ 0x70726f6d7074ULL));  // "prompt": its own stream, apart from the weights'
  const double a = std::sqrt(3.0);
  for (auto& v : x) v = static_cast<float>(a * (2 * rng.uniform() - 1));
  return x;
}

}  // namespace fulcrum::prefill

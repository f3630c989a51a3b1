#include "fulcrum/prefill/head_patterns.hpp"

#include "fulcrum/core/error.hpp"

#include <algorithm>

namespace fulcrum::prefill {

MaskSpec pattern_mask(int kind, Tokens tokens) {
  FULCRUM_CHECK(tokens >= 1 && kind >= 0 && kind < 4, "pattern {} over {} tokens", kind, tokens);
  switch (kind) {
    case 1: return MaskSpec::lambda(std::max<Tokens>(1, tokens / 32), std::max<Tokens>(1, tokens / 8));
    case 2: {
      const Tokens stride = std::max<Tokens>(1, tokens / 16);
      std::vector<Tokens> verticals, slashes;
      for (Tokens v = 0; v < std::min<Tokens>(4, tokens); ++v) verticals.push_back(v);
      for (Tokens v = stride; v < tokens; v += stride) verticals.push_back(v);
      for (Tokens s = 0; s < stride; ++s) slashes.push_back(s);
      for (Tokens s : {tokens / 4, tokens / 2}) {
        if (s < tokens) slashes.push_back(s);
      }
      return MaskSpec::vertical_slash(std::move(verticals), std::move(slashes));
    }
    case 3: {
      const Tokens block = std::min<Tokens>(64, std::max<Tokens>(1, tokens / 8));
      std::vector<std::pair<Tokens, Tokens>> pairs;
      for (Tokens q = 0; q * block < tokens; ++q) {
        for (Tokens k : {Tokens{0}, q - 1, q, q / 2}) {
          if (k >= 0) pairs.emplace_back(q, k);
        }
      }
      return MaskSpec::block_sparse(block, std::move(pairs));
    }
    default: return MaskSpec::causal();
  }
}

std::vector<std::vector<MaskSpec>> head_patterns(std::string_view patterns, const ModelShape& shape, Tokens tokens) {
  if (patterns != "mixed" && patterns != "full") fail("patterns = '{}': must be mixed or full", patterns);
  std::vector<MaskSpec> kinds;
  kinds.reserve(4);
  for (int k = 0; k < 4; ++k) kinds.push_back(pattern_mask(patterns == "full" ? 0 : k, tokens));
  std::vector<std::vector<MaskSpec>> out(static_cast<std::size_t>(shape.layers));
  for (int l = 0; l < shape.layers; ++l) {
    for (int h = 0; h < shape.q_heads; ++h)
      out[static_cast<std::size_t>(l)].push_back(kinds[static_cast<std::size_t>((h + l) % 4)]);
  }
  return out;
}

}  // namespace fulcrum::prefill

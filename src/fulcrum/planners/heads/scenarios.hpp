// The ten single-layer allocation scenarios of FlexAttn's evaluation (docs/experiments.md), Llama-3-8B's
// head shape: GQA groups of 4 q heads (so 16 heads are 4 KV groups, 72 heads 18), head dim 128.
// The paper does not publish its A-shape and block-sparse parameters; ours (scenario_pattern):
//   F = full (causal), A = a-shape sink 128 + window 4096, V = vertical-slash (1000, 6096) (MInference's
//   largest class), B = block-sparse, 64-token blocks, density 0.1.
// "At random" draws each head's type uniformly from the allowed ones with the given seed.
#pragma once

#include "fulcrum/planners/heads/patterns.hpp"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace fulcrum::heads {

struct Scenario {
  std::string name;         // "S1"
  std::string arrangement;  // "8 F then 8 A"
  int devices = 0;
  int kv_heads = 0;
  LayerPatterns heads;  // one per q head
};

inline constexpr int kScenarioGroupSize = 4;  // Llama-3-8B: 32 q heads over 8 KV heads

/// 'F', 'A', 'V' or 'B' as above.
HeadPattern scenario_pattern(char type);
/// "S1".."S10"; anything else is bad input naming `scenario` and the choices.
Scenario scenario(std::string_view name, std::uint64_t seed);
std::vector<std::string> scenario_names();

}  // namespace fulcrum::heads

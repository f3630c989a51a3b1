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

/// Built-in head pattern reports for a model's layers and heads (`fulcrum prefill --patterns`, `fulcrum
/// profile --heads`), their parameters scaled to the prompt length T so every kind stays what it is (sparse,
/// and not all of the prompt) at any length, 96 tokens in tests or 128K:
///  - "full": every head full.
///  - "mixed": head h of layer l is kind (h + l) mod 4 of full; a-shape sink max(1, T/32), window
///    max(1, T/8); vertical-slash budgets (max(1, T/8), max(1, T/16)); block-sparse blocks of
///    min(64, max(1, T/8)) tokens, 4 key blocks per query block. So every rank of a contiguous assignment
///    gets the same mix, and KV groups mix kinds.
/// Returns false for another name (a report file, then).
bool is_builtin_head_patterns(std::string_view name);
HeadPatternReport builtin_head_patterns(std::string_view name, const ModelShape& model, Tokens prompt_len);
/// `source` a built-in name or a report file (read_head_patterns), checked against the model (check_model).
HeadPatternReport load_head_patterns(const std::string& source, const ModelShape& model, Tokens prompt_len);

}  // namespace fulcrum::heads

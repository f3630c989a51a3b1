// Per-head masks to prefill with until head pattern reports are plugged in: every head causal, or a
// deterministic mix of FlexAttn's four pattern kinds. The mix gives head h of layer l the kind (h + l) mod 4:
//   0 FULL         causal (dense; a decoder's "full" head)
//   1 A-shape      lambda:SINK:WINDOW, sink = max(1, T/32), window = max(1, T/8)
//   2 vertical-slash  verticals {0, 1, 2, 3} and every multiple of max(1, T/16); slashes 0 .. max(1, T/16) - 1
//                  and T/4, T/2
//   3 block-sparse blocks of B = min(64, max(1, T/8)) tokens; query block q sees key blocks 0, q - 1, q
//                  and q / 2
// (FlexAttn publishes no parameters for A-shape and block-sparse; these are ours.) Everything is clipped
// to the prompt, so any T >= 1 gives valid masks.
#pragma once

#include "fulcrum/core/interval.hpp"
#include "fulcrum/workload/mask.hpp"
#include "fulcrum/workload/model_shape.hpp"

#include <string_view>
#include <vector>

namespace fulcrum::prefill {

/// The mask of pattern kind `kind` (0..3 as above) for a prompt of `tokens`.
MaskSpec pattern_mask(int kind, Tokens tokens);

/// "mixed" (above) or "full" (every head causal): [layer][q head]. Bad input naming `patterns` otherwise.
std::vector<std::vector<MaskSpec>> head_patterns(std::string_view patterns, const ModelShape& shape, Tokens tokens);

}  // namespace fulcrum::prefill

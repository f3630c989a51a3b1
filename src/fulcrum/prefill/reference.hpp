// The single-process reference prefill: the same model with full weights, every value in fp64, plain
// loops (no BLAS, no tensor parallelism, no weight reorganisation), attention per head with its own mask
// by the materialised fp64 reference (kernels/reference.hpp). Independent of the rank code: it shares only
// the weights file, the prompt and the masks.
#pragma once

#include "fulcrum/prefill/prefill_spec.hpp"

#include <string>
#include <vector>

namespace fulcrum::prefill {

/// The final hidden states after the final norm, [tokens][hidden]. spec.assignment is not read.
std::vector<double> reference_prefill(const PrefillSpec& spec, const std::string& weights_path);

/// max |got - want| / max |want|: the error relative to the output's scale (0 for two empty vectors).
double max_relative_error(const std::vector<float>& got, const std::vector<double>& want);

}  // namespace fulcrum::prefill

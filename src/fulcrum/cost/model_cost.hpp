// Costs of the context-independent layers (projections and MLP), which scale linearly in tokens.
#pragma once

#include "fulcrum/workload/batch.hpp"
#include "fulcrum/workload/model_shape.hpp"

namespace fulcrum {

/// Forward FLOPs per token per layer of the QKV and output projections and the SwiGLU MLP.
double linear_forward_flops_per_token(const ModelShape& model);
/// A whole document's forward FLOPs per layer: its attention under its mask and its linear layers (the
/// work WLB-LLM balances, and what auto's per-iteration choice normalises by).
double document_forward_flops(const ModelShape& model, const Document& doc);
/// Activation bytes stored per token per layer for the backward pass (no recomputation).
double activation_bytes_per_token(const ModelShape& model);
/// Of those, the fp32 LSE per q head (what recomputing core attention frees).
double lse_bytes_per_token(const ModelShape& model);

}  // namespace fulcrum

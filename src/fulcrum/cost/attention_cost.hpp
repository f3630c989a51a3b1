// Core-attention cost: FLOPs of (query ranges x key range) under a document's mask, and the bytes of
// the tensors that move when the work runs away from the tokens' owner. Per layer, all q heads.
#pragma once

#include "fulcrum/core/interval.hpp"
#include "fulcrum/workload/head_masks.hpp"
#include "fulcrum/workload/mask.hpp"
#include "fulcrum/workload/model_shape.hpp"

#include <span>

namespace fulcrum {

/// The one FLOPs formula: forward FLOPs per visible (q, k) pair over `heads` q heads. QK^T and PV are
/// each d multiply-adds (2*d FLOPs) per head. Kernels, plan stats and the simulator all call it.
inline double attention_flops_per_pair(int head_dim, int heads) { return 4.0 * head_dim * heads; }
/// Forward FLOPs per visible (q, k) pair over all q heads of the model.
double attention_forward_flops_per_pair(const ModelShape& model);
/// The backward pass recomputes P and forms dS, dQ, dK, dV: 2.5x the forward FLOPs.
inline constexpr double kBackwardFlopsFactor = 2.5;

/// Visible pairs of `queries` (one or two ranges, e.g. a head+tail pair) against `keys`.
Tokens attention_pairs(const MaskSpec& mask, std::span<const Range> queries, Range keys, Tokens doc_len);
double attention_forward_flops(const ModelShape& model, const MaskSpec& mask, std::span<const Range> queries,
                               Range keys, Tokens doc_len);

/// Forward FLOPs of q heads `heads` (of `q_heads`) of rows `queries` against `keys`, each head counted
/// with its own mask: runs from mask_runs(). One run over all heads gives exactly the all-head number.
double attention_forward_flops(int head_dim, int q_heads, std::span<const MaskRun> runs, std::span<const Range> queries,
                               Range keys, Tokens doc_len);

/// Bytes per token of each tensor that crosses the network (GQA- and dtype-aware). LSE is fp32.
struct TokenBytes {
  double q = 0, kv = 0, o = 0, lse = 0;
  double output() const { return o + lse; }
};
TokenBytes token_bytes(const ModelShape& model);

}  // namespace fulcrum

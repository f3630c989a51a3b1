// Core-attention cost: FLOPs of (query ranges x key range) under a document's mask, and the bytes of
// the tensors that move when the work runs away from the tokens' owner. Per layer, all q heads.
#pragma once

#include "fulcrum/core/interval.hpp"
#include "fulcrum/workload/mask.hpp"
#include "fulcrum/workload/model_shape.hpp"

#include <span>

namespace fulcrum {

/// Forward FLOPs per visible (q, k) pair: QK^T and PV are each 2*d multiply-adds per head.
double attention_forward_flops_per_pair(const ModelShape& model);
/// The backward pass recomputes P and forms dS, dQ, dK, dV: 2.5x the forward FLOPs.
inline constexpr double kBackwardFlopsFactor = 2.5;

/// Visible pairs of `queries` (one or two ranges, e.g. a head+tail pair) against `keys`.
Tokens attention_pairs(const MaskSpec& mask, std::span<const Range> queries, Range keys, Tokens doc_len);
double attention_forward_flops(const ModelShape& model, const MaskSpec& mask, std::span<const Range> queries,
                               Range keys, Tokens doc_len);

/// Bytes per token of each tensor that crosses the network (GQA- and dtype-aware). LSE is fp32.
struct TokenBytes {
  double q = 0, kv = 0, o = 0, lse = 0;
  double output() const { return o + lse; }
};
TokenBytes token_bytes(const ModelShape& model);

}  // namespace fulcrum

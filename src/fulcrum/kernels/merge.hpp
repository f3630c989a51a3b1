// Merging partial attention results. When a query row's keys are split across servers, each part
// returns (O_i, LSE_i) over its keys; the exact result over all keys is
//   LSE = log(sum_i exp(LSE_i)),   O = sum_i exp(LSE_i - LSE) * O_i.
// The matching backward rule: run attention_backward on each part with the *merged* O and LSE and
// the full dO. Then P_i = exp(S_i - LSE) are exactly the full softmax's probabilities on that part
// and D = rowsum(dO * O) is the full row's, so each part's dK/dV is exact and the parts' dQ sum to
// the full dQ.
#pragma once

#include "fulcrum/kernels/bf16.hpp"
#include "fulcrum/kernels/tensor.hpp"

#include <span>

namespace fulcrum::kernels {

template <class T>
struct PartialResult {
  HeadTensor<const T> o;
  HeadTensor<const float> lse;
};

/// Merges parts over the same rows and heads into o and lse (which may alias parts[0]). Rows that no
/// part sees a key for stay O = 0, LSE = -inf.
template <class T>
void merge_partials(std::span<const PartialResult<T>> parts, HeadTensor<T> o, HeadTensor<float> lse);

}  // namespace fulcrum::kernels

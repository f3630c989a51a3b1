// NaN and infinity in the kernels' inputs propagate: an output that depends on a non-finite input is
// NaN, and no other output changes. The fused kernels alone would get this wrong both ways: their running
// maximum skips a NaN score and exp2 of a NaN is clamped (a poisoned row came back as O = 0, LSE = -inf,
// a finite and silently wrong answer), while a NaN LSE spreads through a tile's masked pairs into
// gradients that do not depend on it. And a training loop's loss scaler must see the NaN to skip a step.
//
// So the cells a call's tasks read are scanned (one pass at memory speed): the backward scans before it
// runs, since it adds into its outputs; the forward only after its tiles met a NaN or infinite score or
// output row (which any non-finite input a tile reads makes), since the scan was ~5% of a sparse
// forward. Nothing more when every value is finite, the usual case. Otherwise the kernel runs on copies
// with the non-finite values zeroed, and then exactly the outputs that read one are set to NaN, by the
// tasks' masks:
// - forward: O and LSE of a (row, q head) that sees a key whose K or V is non-finite, or whose Q is and
//   that sees any key (a row that sees none keeps O = 0, LSE = -inf);
// - backward: dQ of a (row, q head) that sees a non-finite key, or whose Q, O, dO or LSE (NaN or +inf;
//   -inf is a row that sees no key) is non-finite and that sees any key; dK and dV of a (key, kv head)
//   that a row with non-finite Q, O, dO or LSE sees, or whose K or V is non-finite and that a row sees.
// For NaN inputs and a forward whose O and LSE feed the backward, this is where the fp64 reference
// (reference.hpp) is NaN, except LSE and dV, which may be NaN where the reference's are not: its LSE
// does not read V, its dV does not read O or V. Infinite inputs give NaN where the reference may give an infinity, or a
// finite value where a logit of -inf weighs nothing.
#pragma once

#include "fulcrum/kernels/attention_task.hpp"
#include "fulcrum/kernels/tensor.hpp"

#include <functional>
#include <span>

namespace fulcrum::kernels {

template <class T>
using ForwardKernel = std::function<void(HeadTensor<const T> q, HeadTensor<const T> k, HeadTensor<const T> v)>;
template <class T>
using BackwardKernel = std::function<void(HeadTensor<const T> q, HeadTensor<const T> k, HeadTensor<const T> v,
                                          HeadTensor<const T> o, HeadTensor<const T> d_o, HeadTensor<const float> lse)>;

/// When an input cell the tasks read is not finite: runs `kernel` (which writes o and lse) on copies with
/// the non-finite values zeroed, sets the outputs that depend on one to NaN and returns true. Otherwise
/// does nothing and returns false: the caller runs the kernel on the inputs themselves.
template <class T>
bool forward_with_non_finite(std::span<const AttentionTask> tasks, const AttentionShape& shape, HeadTensor<const T> q,
                             HeadTensor<const T> k, HeadTensor<const T> v, HeadTensor<T> o, HeadTensor<float> lse,
                             const ForwardKernel<T>& kernel);

/// The same for the backward (`kernel` adds into dq, dk and dv).
template <class T>
bool backward_with_non_finite(std::span<const AttentionTask> tasks, const AttentionShape& shape, HeadTensor<const T> q,
                              HeadTensor<const T> k, HeadTensor<const T> v, HeadTensor<const T> o,
                              HeadTensor<const T> d_o, HeadTensor<const float> lse, HeadTensor<float> dq,
                              HeadTensor<float> dk, HeadTensor<float> dv, const BackwardKernel<T>& kernel);

}  // namespace fulcrum::kernels

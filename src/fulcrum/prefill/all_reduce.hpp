// Tensor parallelism's all-reduce (sum) of fp32 activations over a Communicator: a ring reduce-scatter
// then a ring all-gather (2·(N-1) steps, each moving 1/N of the buffer to the next rank). Every element is
// summed once, in one fixed order, by one rank, and copied to the rest: all ranks end bitwise identical.
#pragma once

#include "fulcrum/runtime/communicator.hpp"

#include <span>

namespace fulcrum::prefill {

/// Replaces `data` on every rank by the element-wise sum over ranks. Every rank passes the same size.
/// Messages use tags [tag_base, tag_base + 2·N).
void all_reduce_sum(runtime::Communicator& comm, std::span<float> data, int tag_base = 0);

}  // namespace fulcrum::prefill

// Materialised-score attention, one query row at a time, no tiling and no online softmax: the
// independent check for the fused kernels (the kernel tests, and `fulcrum run --reference fp64`), never a production
// path.
//   reference_attention: every value in fp64. The ground truth.
//   naive_bf16_attention: what a framework computing in bf16 gets (fp32 dot products, every
//     product and the softmax rounded to bf16) — the yardstick for the kernel's bf16 error.
// Inputs are flat token-major buffers ([rows][heads][dim]); d_o empty means forward only.
#pragma once

#include "fulcrum/kernels/attention_task.hpp"

#include <span>
#include <vector>

namespace fulcrum::kernels {

template <class Real>
struct MaterialisedResult {
  std::vector<Real> o, lse;      // [q rows][q heads][dim], [q rows][q heads]; rows no task names are 0
  std::vector<Real> dq, dk, dv;  // empty unless d_o was given
};

MaterialisedResult<double> reference_attention(std::span<const AttentionTask> tasks, const AttentionShape& shape,
                                               std::span<const double> q, std::span<const double> k,
                                               std::span<const double> v, std::span<const double> d_o);

MaterialisedResult<float> naive_bf16_attention(std::span<const AttentionTask> tasks, const AttentionShape& shape,
                                               std::span<const float> q, std::span<const float> k,
                                               std::span<const float> v, std::span<const float> d_o);

}  // namespace fulcrum::kernels

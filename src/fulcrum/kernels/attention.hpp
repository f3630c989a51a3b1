// Fused core attention on the CPU: many CA-tasks in one call, forward and backward, FlashAttention-
// style (tiles of 64 x 64, online softmax, fp32 accumulation, P recomputed from the LSE in backward).
// Storage is fp32 or bf16 (T = float or BFloat16); LSE and gradients are fp32.
//
// Layouts are token-major (tensor.hpp): Q, O, dO, dQ are [q rows][q_heads][head_dim]; K, V, dK, dV
// are [kv rows][kv_heads][head_dim]; LSE is [q rows][q_heads][1], the natural log of the softmax
// denominator (sum over visible keys of exp(scale * q.k)). A row with no visible key gets O = 0 and
// LSE = -inf. Fully masked tiles are skipped, never computed. NaN and infinity in an input propagate: the
// outputs that read one are NaN, the others unchanged (non_finite.hpp).
//
// Everything is validated before any work; bad input throws fulcrum::Error naming the field.
#pragma once

#include "fulcrum/kernels/attention_task.hpp"
#include "fulcrum/kernels/bf16.hpp"
#include "fulcrum/kernels/tensor.hpp"

#include <span>

namespace fulcrum::kernels {

/// Writes O and LSE for every query row of every task (rows no task names are left untouched).
/// Parallel over (task, q head, 64-row query tile) with OpenMP, largest tiles first.
template <class T>
void attention_forward(std::span<const AttentionTask> tasks, const AttentionShape& shape, HeadTensor<const T> q,
                       HeadTensor<const T> k, HeadTensor<const T> v, HeadTensor<T> o, HeadTensor<float> lse);

/// Adds this call's gradients into dQ, dK and dV (zero them first for plain gradients). Tasks that
/// read the same key rows both add into them. o and lse must be the forward outputs over the *whole*
/// key set of each row: after a split over keys, pass the merged O and LSE (merge.hpp) to every part.
/// Two passes: dK/dV parallel over (task, kv head, key tile); dQ over (task, q head, query tile).
template <class T>
void attention_backward(std::span<const AttentionTask> tasks, const AttentionShape& shape, HeadTensor<const T> q,
                        HeadTensor<const T> k, HeadTensor<const T> v, HeadTensor<const T> o, HeadTensor<const T> d_o,
                        HeadTensor<const float> lse, HeadTensor<float> dq, HeadTensor<float> dk, HeadTensor<float> dv);

}  // namespace fulcrum::kernels

// What one fused attention call computes: a list of CA-tasks over shared Q/K/V buffers. Tasks of
// different documents (and, in the runtime, of different ranks and pipeline stages) go into one call,
// so the kernel's throughput depends on the total work, not on how finely the planner cut it.
#pragma once

#include "fulcrum/core/interval.hpp"
#include "fulcrum/kernels/tensor.hpp"
#include "fulcrum/workload/mask.hpp"

#include <array>
#include <span>

namespace fulcrum::kernels {

/// Buffer rows [row, row + count) hold the tokens at document positions [position, position + count).
struct TokenRows {
  Tokens row = 0;
  Tokens position = 0;
  Tokens count = 0;
};

/// One CA-task: query rows (one range, or a head+tail pair) of a document against one key range,
/// all heads. The mask is evaluated at document positions, so a task sees exactly the pairs the mask
/// allows inside its (queries x keys) rectangle.
struct AttentionTask {
  std::array<TokenRows, 2> queries{};  // the second may be empty
  TokenRows keys;
  Tokens doc_len = 0;
  MaskSpec mask;
};

/// Head layout shared by all tasks of a call. q_heads must be a multiple of kv_heads (GQA: q head h
/// reads kv head h / (q_heads / kv_heads)). scale <= 0 means the usual 1 / sqrt(head_dim).
struct AttentionShape {
  int q_heads = 1;
  int kv_heads = 1;
  int head_dim = 64;
  double scale = 0;
  // Backward only: sum dK/dV of key rows that several tasks read in task order (per-tile partials
  // reduced after the pass) instead of with atomic adds, so the gradients are bitwise identical
  // whatever the thread count or schedule. Costs a partial buffer per shared key tile (backward.cpp).
  bool deterministic = false;

  float softmax_scale() const;
  void validate() const;
};

/// Checks every task against the buffers' row counts before any work: ranges inside their buffers
/// and inside the document, query rows of different tasks disjoint (each output row has one writer).
/// Errors name the task and field, e.g. "tasks[3].keys: rows [100, 300) leave the K/V buffer (256 rows)".
void validate_tasks(std::span<const AttentionTask> tasks, Tokens q_rows, Tokens kv_rows);

/// Visible (query, key) pairs of all tasks, and the forward FLOPs per head-dim unit of them:
/// forward FLOPs = 4 * head_dim * q_heads * pairs (QK^T and PV, a multiply-add each).
Tokens task_pairs(std::span<const AttentionTask> tasks);
double forward_flops(std::span<const AttentionTask> tasks, const AttentionShape& shape);

}  // namespace fulcrum::kernels

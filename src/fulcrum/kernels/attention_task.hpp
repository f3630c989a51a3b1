// What one fused attention call computes: a list of CA-tasks over shared Q/K/V buffers. Tasks of
// different documents (and, in the runtime, of different ranks and pipeline stages) go into one call,
// so the kernel's throughput depends on the total work, not on how finely the planner cut it.
#pragma once

#include "fulcrum/core/interval.hpp"
#include "fulcrum/kernels/tensor.hpp"
#include "fulcrum/plan/program.hpp"
#include "fulcrum/workload/head_masks.hpp"
#include "fulcrum/workload/mask.hpp"

#include <array>
#include <span>
#include <vector>

namespace fulcrum::kernels {

/// One CA-task: the Plan IR's AttentionItem (query rows, one span or a head+tail pair, of a document
/// against one key span, for q heads `heads`) plus what the kernel needs of its document. The mask is
/// evaluated at document positions, so a task sees exactly the pairs the mask allows inside its
/// (queries x keys) rectangle. `doc` is not read by the kernels.
struct AttentionTask : AttentionItem {
  Tokens doc_len = 0;
  MaskSpec mask;
  /// Empty: `mask` for every head. Otherwise one mask per q head of the call (q_heads of them), owned
  /// by the caller (e.g. the plan's PlanDocument) and alive for the call.
  std::span<const MaskSpec> head_masks{};

  const MaskSpec& mask_of(int head) const {
    return head_masks.empty() ? mask : head_masks[static_cast<std::size_t>(head)];
  }
  /// The task's heads as runs sharing one mask (workload/head_masks.hpp).
  std::vector<MaskRun> mask_runs() const { return fulcrum::mask_runs(mask, head_masks, heads); }
};

/// Builds a task from a plan item and its document (the executor's lowering; head_masks are viewed).
AttentionTask task_from_item(const AttentionItem& item, const PlanDocument& doc);

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
/// and inside the document, heads inside [0, q_heads), head_masks empty or q_heads long, and one writer
/// per output (row, head): tasks may share query rows only over disjoint head ranges. Errors name the
/// task and field, e.g. "tasks[3].keys: rows [100, 300) leave the K/V buffer (256 rows)".
void validate_tasks(std::span<const AttentionTask> tasks, Tokens q_rows, Tokens kv_rows, int q_heads);

/// Forward FLOPs of all tasks: each task's heads, each head's own visible pairs (cost/attention_cost).
double forward_flops(std::span<const AttentionTask> tasks, const AttentionShape& shape);

}  // namespace fulcrum::kernels

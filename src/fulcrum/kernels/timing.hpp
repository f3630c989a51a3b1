// Measuring the kernels on this machine: its fp32 FMA peak, and timed attention calls on seeded
// random data. Used by `fulcrum bench kernels` and `fulcrum profile`; timings are medians of repeats.
#pragma once

#include "fulcrum/cost/hardware_model.hpp"
#include "fulcrum/kernels/attention_task.hpp"

#include <span>
#include <string>
#include <vector>

namespace fulcrum::kernels {

/// Stated bounds of what `bench kernels` and `profile` measure: a call over more rows takes hours (time
/// grows with the square of the length), and more repeats multiply it.
inline constexpr Tokens kMaxMeasuredLength = Tokens{1} << 17;
inline constexpr int kMaxMeasuredRepeats = 1000;

/// Bytes the buffers of a measured call of q_rows x kv_rows take (Q, O, dO, dQ and LSE rows; K, V, dK and
/// dV rows; fp32), for the up-front memory check.
double measured_call_bytes(const AttentionShape& shape, Tokens q_rows, Tokens kv_rows);

enum class DType { kF32, kBF16 };
DType parse_dtype(const std::string& text);  // "fp32" | "bf16"; errors name the field `dtype`
const char* to_string(DType dtype);

/// fp32 FLOP/s of independent vector FMAs on all OpenMP threads: the roofline the kernels are judged
/// against (2 FLOPs per lane per FMA).
double measure_fma_peak();

struct AttentionTiming {
  double forward_s = 0;   // median seconds of one forward call
  double backward_s = 0;  // median seconds of one backward call (0 if not measured)
  double forward_flops = 0;
  double backward_flops = 0;  // 2.5x forward: the 5 tile products of the standard backward
};

/// Runs the tasks on random buffers (one warm-up, then `repeats` timed calls each; a call shorter than
/// `min_seconds` is repeated until the batch of calls takes that long, and divided).
AttentionTiming time_attention(std::span<const AttentionTask> tasks, const AttentionShape& shape, Tokens q_rows,
                               Tokens kv_rows, DType dtype, int repeats, bool backward, double min_seconds = 0.05);

/// The fixed costs of an attention call on this machine, forward and backward, apart from its work (the
/// simulator's HardwareModel::overheads): calls over 1 and 64 one-token documents (a query row against its
/// key row, no work to speak of) give the per-item cost (their difference / 63) and the rest of the one-item
/// call.
CallOverheads measure_call_overheads(const AttentionShape& shape, DType dtype, int repeats);

/// One document of doc_len tokens under `mask`, its query rows cut into shards of `shard` tokens,
/// each shard one task against all keys: the same total work whatever the shard size.
std::vector<AttentionTask> sharded_document(Tokens doc_len, Tokens shard, const MaskSpec& mask);

}  // namespace fulcrum::kernels

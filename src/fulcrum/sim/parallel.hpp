// How a training job lays its GPUs out, and the device the simulator sees for one tensor-parallel group.
//
// gpus = tp x dp x pp. Tensor parallelism stays inside a node (Megatron-LM's rule: its all-reduces
// need NVLink). The simulator's "rank" is one TP group: its tp GPUs run every layer together, each on
// 1/tp of the heads and of the matrix columns, so for attention planning a group is one device with tp
// times the compute, memory and link bandwidth of a GPU (each GPU moves its own heads' share of Q/K/V
// over its own NVLink port and NIC). dp counts the groups in one pipeline stage: data parallelism
// times, for the per-document-CP baselines, context parallelism (cp groups of one CP group share
// documents; dp / cp model replicas hold different data).
#pragma once

#include "fulcrum/cost/hardware_model.hpp"
#include "fulcrum/workload/model_shape.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace fulcrum::sim {

/// The most micro-batches per pipeline and iteration; and per run, micro-batches x iterations (each
/// micro-batch is planned and simulated, so a run's time is linear in these).
inline constexpr int kMaxMicrobatches = 1024;
inline constexpr int kMaxMicrobatchesPerRun = 1 << 16;

struct ParallelConfig {
  int gpus = 64;
  int tp = 8;
  int pp = 1;
  int cp = 1;            // perdoc-cp and wlb: TP groups per context-parallel group (must divide dp)
  int microbatches = 0;  // per pipeline and iteration; 0 picks 1 without PP and 2 x pp with it

  int dp() const { return static_cast<int>(gpus / (std::int64_t{tp} * pp)); }  // 64 bits: tp x pp may not fit an int
  int attention_ranks() const { return gpus / tp; }                            // every TP group is an attention server
  int microbatch_count() const { return microbatches > 0 ? microbatches : (pp == 1 ? 1 : 2 * pp); }
  std::string to_string() const;  // "tp8 dp8 pp1 cp1 mb1"

  /// Throws fulcrum::Error naming the field: tp must divide the node and the heads, tp x pp the GPUs,
  /// pp the layers, cp the dp groups.
  void validate(const HardwareModel& gpu, const ModelShape& model) const;
  /// validate() but for cp: what dp() and the layout searches need, checked before they pick a cp.
  void validate_layout(const HardwareModel& gpu, const ModelShape& model) const;
};

/// The powers of two up to `limit` that divide `n`, ascending: the CP and PP degrees a layout can take.
std::vector<int> powers_of_two_dividing(int n, int limit);

/// The device one TP group forms: tp times a GPU's FLOP/s (matrix and attention), memory, memory
/// bandwidth and link bandwidth, devices_per_node / tp of them per node. Latencies stay per message.
HardwareModel tp_group_hardware(const HardwareModel& gpu, int tp);

/// Seconds of one ring all-reduce of `bytes` across the tp GPUs of a group over NVLink:
/// 2 (tp - 1) / tp x bytes / (per-GPU intra-node bandwidth), plus 2 (tp - 1) latencies.
double tp_allreduce_s(const HardwareModel& gpu, int tp, double bytes);

/// Seconds of the gradient reduce-scatter + all-gather across `replicas` model replicas, per GPU
/// `bytes` of gradients, over the slowest link the ring crosses (inter-node once replicas span nodes).
double dp_gradient_sync_s(const HardwareModel& gpu, int replicas, bool spans_nodes, double bytes);

}  // namespace fulcrum::sim

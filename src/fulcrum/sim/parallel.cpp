#include "fulcrum/sim/parallel.hpp"

#include "fulcrum/core/error.hpp"
#include "fulcrum/workload/limits.hpp"

#include <fmt/format.h>

namespace fulcrum::sim {

std::string ParallelConfig::to_string() const {
  return fmt::format("tp{} dp{} pp{} cp{} mb{}", tp, dp(), pp, cp, microbatch_count());
}

void ParallelConfig::validate(const HardwareModel& gpu, const ModelShape& model) const {
  validate_layout(gpu, model);
  if (cp < 1 || dp() % cp != 0) fail("cp = {}: must divide dp = {}", cp, dp());
}

void ParallelConfig::validate_layout(const HardwareModel& gpu, const ModelShape& model) const {
  if (gpus < 1 || gpus > kMaxRanks) fail("gpus = {}: must be in [1, {}] (the supported limit)", gpus, kMaxRanks);
  if (tp < 1 || gpu.devices_per_node % tp != 0) {
    fail("tp = {}: must divide the {} GPUs of a node of '{}' (tensor parallelism stays in a node)", tp,
         gpu.devices_per_node, gpu.name);
  }
  if (model.q_heads % tp != 0 || model.kv_heads % tp != 0) {
    fail("tp = {}: must divide the model's {} query heads and {} kv heads", tp, model.q_heads, model.kv_heads);
  }
  if (tp > 1 && gpu.compute_slots_per_node > 0) {
    fail("tp = {}: must be 1 on '{}', whose devices share compute slots", tp, gpu.name);
  }
  // In 64 bits: with pp up to INT_MAX, tp x pp overflows an int (and once wrapped to 0, divides by it).
  const std::int64_t stage_gpus = std::int64_t{tp} * pp;
  if (pp < 1 || gpus % stage_gpus != 0) fail("pp = {}: tp x pp = {} must divide gpus = {}", pp, stage_gpus, gpus);
  if (model.layers % pp != 0) fail("pp = {}: must divide the model's {} layers", pp, model.layers);
  // Simulated time grows linearly with micro-batches (each is planned and simulated): a stated bound.
  if (microbatches < 0 || microbatches > kMaxMicrobatches) {
    fail("microbatches = {}: must be in [0, {}] (0 picks a default)", microbatches, kMaxMicrobatches);
  }
}

std::vector<int> powers_of_two_dividing(int n, int limit) {
  std::vector<int> out;
  for (int p = 1; p <= limit; p *= 2) {
    if (n % p == 0) out.push_back(p);
  }
  return out;
}

HardwareModel tp_group_hardware(const HardwareModel& gpu, int tp) {
  HardwareModel group = gpu;
  if (tp == 1) return group;
  group.name = fmt::format("{}/tp{}", gpu.name, tp);
  group.devices_per_node = gpu.devices_per_node / tp;
  group.peak_flops *= tp;
  group.memory_bytes *= tp;
  group.memory_bandwidth *= tp;
  group.intra_node.bandwidth_bytes_per_s *= tp;
  group.inter_node.bandwidth_bytes_per_s *= tp;
  for (auto* grid : {&group.attention.forward(), &group.attention.backward()}) {
    for (auto& rate : grid->flops_per_s) rate *= tp;
  }
  group.validate();
  return group;
}

double tp_allreduce_s(const HardwareModel& gpu, int tp, double bytes) {
  if (tp <= 1) return 0;
  const double steps = 2.0 * (tp - 1);
  return steps * gpu.intra_node.latency_s + steps / tp * bytes / gpu.intra_node.bandwidth_bytes_per_s;
}

double dp_gradient_sync_s(const HardwareModel& gpu, int replicas, bool spans_nodes, double bytes) {
  if (replicas <= 1) return 0;
  const LinkSpec& link = spans_nodes ? gpu.inter_node : gpu.intra_node;
  const double steps = 2.0 * (replicas - 1);
  return steps * link.latency_s + steps / replicas * bytes / link.bandwidth_bytes_per_s;
}

}  // namespace fulcrum::sim

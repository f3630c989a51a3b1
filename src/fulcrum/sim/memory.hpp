// Memory per GPU of a training job, so a configuration that does not fit is reported, not ignored.
// Megatron-LM with its distributed optimizer and no activation recomputation:
//  - bf16 weights and fp32 main gradients of the GPU's 1/(tp x pp) of the parameters (6 bytes each);
//  - Adam's fp32 master weights and two moments, sharded over the dp groups of a stage (12 bytes / dp);
//  - activations: activation_bytes_per_token (model_cost.hpp) x the tokens a TP group holds over the
//    micro-batches in flight x the stage's layers, split over tp;
//  - attention buffers: the largest pass's received Q/K/V and partial outputs for one layer (freed after
//    it), split over tp. Per-document CP's all-gathered K/V lives here.
// Not modelled: the embedding and LM head (ModelShape has no vocabulary), allocator fragmentation and the
// framework's workspace; a real job has less headroom than this reports.
#pragma once

#include "fulcrum/sim/parallel.hpp"

#include <nlohmann/json_fwd.hpp>

namespace fulcrum::sim {

struct MemoryUse {
  double weights_bytes = 0, gradients_bytes = 0, optimizer_bytes = 0, activations_bytes = 0,
         attention_buffers_bytes = 0;
  double capacity_bytes = 0;
  double total_bytes() const;
  bool out_of_memory() const { return total_bytes() > capacity_bytes; }
  nlohmann::json to_json() const;
};

/// Parameters of the transformer layers (QKV, O, MLP; norms and embeddings excluded).
double layer_parameters(const ModelShape& model);

/// `tokens_in_flight`: the most tokens one TP group holds activations for at once (its micro-batches in
/// flight together); `attention_buffer_bytes`: the group's largest per-layer attention buffers.
MemoryUse memory_per_gpu(const ModelShape& model, const HardwareModel& gpu, const ParallelConfig& parallel,
                         double tokens_in_flight, double attention_buffer_bytes);

}  // namespace fulcrum::sim
